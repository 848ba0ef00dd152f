package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

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
	// The controller registers its reconcile counters when it starts; the queue's depth
	// appears once something was queued: the sample KafkaMirror (its clusters do not
	// exist, so it is reconciled and requeued, which is all the scrape needs).
	var sample unstructured.Unstructured
	data, err := os.ReadFile(filepath.Join(repoRoot, "config/samples/kafkamirror_v1alpha1_plain.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &sample.Object); err != nil {
		t.Fatal(err)
	}
	sample.SetNamespace("default")
	if err := mgr.GetClient().Create(ctx, &sample); err != nil {
		t.Fatalf("while creating the sample KafkaMirror: %v", err)
	}
	deadline := time.Now().Add(engineStartTimeout)
	var last exposition
	for {
		text, err := scrapeURL(http.DefaultClient, "http://"+addr+"/metrics")
		if err == nil {
			exp, err := parseExposition(text)
			if err != nil {
				t.Fatal(err)
			}
			if exp["controller_runtime_reconcile_total"]["controller"] && exp["workqueue_depth"]["name"] && exp["kafka_mirror_operator_topics"]["state"] {
				return exp
			}
			last = exp
		}
		if time.Now().After(deadline) {
			var names []string
			for name, ls := range last {
				if strings.HasPrefix(name, "controller_runtime_reconcile") || strings.HasPrefix(name, "workqueue_") {
					names = append(names, name+fmt.Sprint(keys(ls)))
				}
			}
			slices.Sort(names)
			t.Fatalf("after %v the operator's /metrics has no reconcile and work-queue metrics of the controller yet (last error %v); it has %v", engineStartTimeout, err, names)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
