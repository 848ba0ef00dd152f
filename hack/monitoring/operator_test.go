package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kafka-mirror/kafka-mirror-operator/controllers"
)

// operatorScrape starts a real operator (the KafkaMirror controller's manager) against a
// real kube-apiserver (envtest) and returns its /metrics: the controller-runtime
// reconcile and work-queue metrics the dashboard's operator panel reads.
func operatorScrape(t *testing.T) exposition {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run the tests with `make test`, or set KUBEBUILDER_ASSETS=$(bash hack/envtest.sh) (builds kube-apiserver and etcd once, cached)")
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(repoRoot, "config/crd/bases")},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("while starting envtest: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	addr, err := freeAddress()
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := controllers.NewManager(cfg, controllers.ManagerOptions{
		Image:                        "kafka-mirror:test",
		MetricsAddress:               addr,
		HealthProbeAddress:           "0",
		SkipControllerNameValidation: true,
		Logger:                       logr.Discard(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	// The controller registers its reconcile counters and its queue when it starts,
	// after the caches synced; wait for them.
	deadline := time.Now().Add(engineStartTimeout)
	for {
		text, err := scrapeURL(http.DefaultClient, "http://"+addr+"/metrics")
		if err == nil {
			exp, err := parseExposition(text)
			if err != nil {
				t.Fatal(err)
			}
			if exp["controller_runtime_reconcile_total"]["controller"] && exp["workqueue_depth"]["name"] {
				return exp
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v the operator's /metrics has no controller metrics yet (last error %v)", engineStartTimeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
