//go:build tools

// Package tools pins the crictl command so `go mod tidy` keeps its dependencies.
package tools

import _ "sigs.k8s.io/cri-tools/cmd/crictl"
