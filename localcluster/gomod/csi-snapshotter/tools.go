//go:build tools

// Package tools pins the snapshot-controller's and the csi-snapshotter's commands so `go mod
// tidy` keeps their dependencies.
package tools

import (
	_ "github.com/kubernetes-csi/external-snapshotter/v8/cmd/csi-snapshotter"
	_ "github.com/kubernetes-csi/external-snapshotter/v8/cmd/snapshot-controller"
)
