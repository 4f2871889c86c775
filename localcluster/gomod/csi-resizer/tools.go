//go:build tools

// Package tools pins the external-resizer's command so `go mod tidy` keeps its dependencies.
package tools

import _ "github.com/kubernetes-csi/external-resizer/cmd/csi-resizer"
