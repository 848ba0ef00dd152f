package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kfake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/controllers"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror"
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
	// The group metrics appear once a KafkaMirror with spec.groups has a checkpointed
	// group: one between two real clusters, whose target group holds a checkpoint.
	if err := mgr.GetClient().Create(ctx, groupsMirror(t)); err != nil {
		t.Fatalf("while creating the KafkaMirror with groups: %v", err)
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
			if exp["controller_runtime_reconcile_total"]["controller"] && exp["workqueue_depth"]["name"] && exp["kafka_mirror_operator_topics"]["state"] &&
				exp["kafka_mirror_operator_group_last_checkpoint_timestamp_seconds"]["group"] && exp["kafka_mirror_operator_group_active_members"]["group"] &&
				exp["kafka_mirror_operator_group_checkpoint_interval_seconds"]["mirror"] {
				return exp
			}
			last = exp
		}
		if time.Now().After(deadline) {
			var names []string
			for name, ls := range last {
				if strings.HasPrefix(name, "controller_runtime_reconcile") || strings.HasPrefix(name, "workqueue_") || strings.HasPrefix(name, "kafka_mirror_operator_") {
					names = append(names, name+fmt.Sprint(keys(ls)))
				}
			}
			slices.Sort(names)
			t.Fatalf("after %v the operator's /metrics has no reconcile, work-queue, topic and group metrics of the controller yet (last error %v); it has %v", engineStartTimeout, err, names)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Shape of the KafkaMirror with groups the operator scrape needs.
const (
	groupsMirrorName = "groups"
	// groupsApp is the consumer group the mirror selects: it committed on the source,
	// and its target group holds the mirror's checkpoint.
	groupsApp = "monitoring-app"
	// groupsTopicSync is the mirror's topicSyncInterval: the operator reads the groups
	// back at each topic sync.
	groupsTopicSync = time.Second
)

// groupsMirror starts a source and a target cluster (closed when t ends), commits
// groupsApp on the source and a checkpoint of it on the target, as the engine would, and
// returns a KafkaMirror between them that selects groupsApp.
func groupsMirror(t *testing.T) *v1alpha1.KafkaMirror {
	t.Helper()
	m := &v1alpha1.KafkaMirror{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: groupsMirrorName},
		Spec: v1alpha1.KafkaMirrorSpec{
			Topics:            v1alpha1.TopicsSpec{Include: []string{regexp.QuoteMeta(liveTopic)}},
			TopicSyncInterval: &metav1.Duration{Duration: groupsTopicSync},
			Groups:            &v1alpha1.GroupsSpec{Include: []string{regexp.QuoteMeta(groupsApp)}},
		},
	}
	for _, c := range []*v1alpha1.ClusterSpec{&m.Spec.Source, &m.Spec.Target} {
		cl, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, liveTopic))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		c.BootstrapServers = cl.ListenAddrs()
	}
	testutil.CommitOffsets(t, m.Spec.Source.BootstrapServers, groupsApp, liveTopic, map[int32]int64{0: 0}, "")
	checkpoint := mirror.CheckpointMetadata{Mirror: controllers.ConsumerGroup(m), At: time.Now().UnixMilli(), SourceTopic: liveTopic}
	testutil.CommitOffsets(t, m.Spec.Target.BootstrapServers, groupsApp, liveTopic, map[int32]int64{0: 0}, checkpoint.String())
	return m
}
