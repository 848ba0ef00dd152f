//go:build deps

// Package deps pins the project's direct dependencies in go.mod while the packages that
// use them are being written in parallel, so that `go mod tidy` in one package does not
// drop a module another package is about to import. Removed once every import is real.
package deps

import (
	_ "github.com/IBM/sarama"
	_ "github.com/Shopify/toxiproxy/v2"
	_ "github.com/go-logr/logr"
	_ "github.com/go-logr/zapr"
	_ "github.com/google/cel-go/cel"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/spf13/cobra"
	_ "github.com/twmb/franz-go/pkg/kfake"
	_ "github.com/twmb/franz-go/pkg/kgo"
	_ "github.com/twmb/franz-go/pkg/kmsg"
	_ "github.com/xdg-go/scram"
	_ "github.com/yuin/gopher-lua"
	_ "go.uber.org/zap"
	_ "golang.org/x/sync/errgroup"
	_ "k8s.io/api/apps/v1"
	_ "k8s.io/apimachinery/pkg/apis/meta/v1"
	_ "k8s.io/client-go/kubernetes"
	_ "sigs.k8s.io/controller-runtime"
	_ "sigs.k8s.io/controller-runtime/pkg/envtest"
	_ "sigs.k8s.io/yaml"
)
