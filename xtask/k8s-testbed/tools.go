//go:build tools

// Package tools keeps the two server programs in go.mod/go.sum so that `go mod tidy`
// does not drop them. It is never built (the `tools` tag is never set); build.sh
// builds the programs by import path.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
