//go:build tools

// Package tools pins upstream JobSet's manager command (the module's root package) so `go mod
// tidy` keeps its dependencies.
package tools

import _ "sigs.k8s.io/jobset"
