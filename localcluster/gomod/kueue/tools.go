//go:build tools

// Package tools pins Kueue's manager command so `go mod tidy` keeps its dependencies.
package tools

import _ "sigs.k8s.io/kueue/cmd/kueue"
