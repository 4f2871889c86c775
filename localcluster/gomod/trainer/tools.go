//go:build tools

// Package tools pins Kubeflow Trainer's manager command so `go mod tidy` keeps its dependencies.
package tools

import _ "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager"
