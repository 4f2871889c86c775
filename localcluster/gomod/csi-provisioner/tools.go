//go:build tools

// Package tools pins the external-provisioner's command so `go mod tidy` keeps its dependencies.
package tools

import _ "github.com/kubernetes-csi/external-provisioner/v5/cmd/csi-provisioner"
