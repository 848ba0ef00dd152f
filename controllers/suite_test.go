package controllers

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
)

// The envtest suite: a real kube-apiserver and etcd (built from source by
// hack/envtest.sh), the operator's manager, and kfake Kafka clusters spoken to over TCP.
var env struct {
	// err is why the suite could not start; envtest tests fail with it.
	err error

	cfg    *rest.Config
	client client.Client

	source, target *kfake.Cluster
	// secure requires SASL/SCRAM-SHA-512 as user secureUser with password securePassword.
	secure *kfake.Cluster

	// logs holds everything the manager logged, to prove no credential is logged.
	logs *testutil.SyncBuffer
}

const (
	secureUser     = "mirror"
	securePassword = "Sup3r-Secret-Passw0rd!"
)

// managedNamespaces are the namespaces the suite's manager watches; each test uses its
// own. The leader-election test runs its own managers in another namespace.
var managedNamespaces = []string{"t-basic", "t-secret", "t-unreachable", "t-invalid", "t-scale", "t-nosync", "t-tls", "t-reach", "t-pause", "t-replicas", "t-podhealth", "t-podoptions", "t-hang", "t-lag", "t-managedauth", "t-groups", "t-autoscale", "t-endpoint", "t-topicid", "t-tenant-a", "t-tenant-b", "t-hpa", "t-syncspec", "t-failover"}

func TestMain(m *testing.M) {
	flag.Parse()
	code, err := runSuite(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "envtest suite:", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func runSuite(m *testing.M) (int, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		// Unit tests still run; every envtest test fails with this message.
		env.err = errors.New("KUBEBUILDER_ASSETS is not set: run `make test`, or `KUBEBUILDER_ASSETS=$(bash hack/envtest.sh) go test ./controllers/` " +
			"(hack/envtest.sh builds kube-apiserver and etcd from source once and prints where they are)")
		return m.Run(), nil
	}
	testEnv := &envtest.Environment{
		CRDDirectoryPaths:     []string{"../config/crd/bases"},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := testEnv.Start()
	if err != nil {
		return 1, fmt.Errorf("while starting envtest (kube-apiserver and etcd from KUBEBUILDER_ASSETS=%s): %w", os.Getenv("KUBEBUILDER_ASSETS"), err)
	}
	defer func() { _ = testEnv.Stop() }()
	env.cfg = cfg

	if env.source, err = kfake.NewCluster(kfake.NumBrokers(1)); err != nil {
		return 1, fmt.Errorf("while starting the source kfake cluster: %w", err)
	}
	defer env.source.Close()
	if env.target, err = kfake.NewCluster(kfake.NumBrokers(1)); err != nil {
		return 1, fmt.Errorf("while starting the target kfake cluster: %w", err)
	}
	defer env.target.Close()
	if env.secure, err = kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(),
		kfake.Superuser(config.SASLSCRAMSHA512, secureUser, securePassword)); err != nil {
		return 1, fmt.Errorf("while starting the SASL kfake cluster: %w", err)
	}
	defer env.secure.Close()

	env.logs = &testutil.SyncBuffer{}
	log := newTestLogger(env.logs)
	ctrl.SetLogger(log)

	scheme, err := NewScheme()
	if err != nil {
		return 1, err
	}
	if env.client, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return 1, fmt.Errorf("while creating the test client: %w", err)
	}
	for _, ns := range append([]string{"t-le", "t-cel"}, managedNamespaces...) {
		if err := env.client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return 1, fmt.Errorf("while creating namespace %s: %w", ns, err)
		}
	}

	mgr, err := NewManager(cfg, ManagerOptions{
		Image:                        testImage,
		WatchNamespaces:              managedNamespaces,
		AllowedBootstrapServers:      suiteAllowedBootstrapServers,
		AllowedEndpoints:             suiteAllowedEndpoints,
		MetricsAddress:               "0",
		HealthProbeAddress:           "0",
		SecretPollInterval:           time.Second,
		SkipControllerNameValidation: true,
		Logger:                       log,
	})
	if err != nil {
		return 1, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	code := m.Run()
	cancel()
	if err := <-done; err != nil {
		return code, fmt.Errorf("the manager failed: %w", err)
	}
	return code, nil
}

// requireEnv fails the test (never skips) when the envtest suite did not start.
func requireEnv(t *testing.T) {
	t.Helper()
	if env.err != nil {
		t.Fatal(env.err)
	}
}

// newTestLogger logs JSON into buf, and to stderr too under `go test -v`.
func newTestLogger(buf *testutil.SyncBuffer) logr.Logger {
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	cores := []zapcore.Core{zapcore.NewCore(enc, zapcore.AddSync(buf), zapcore.DebugLevel)}
	if testing.Verbose() {
		cores = append(cores, zapcore.NewCore(enc, zapcore.Lock(os.Stderr), zapcore.InfoLevel))
	}
	return zapr.NewLogger(zap.New(zapcore.NewTee(cores...)))
}

// kafkaAdmin connects a sarama admin to a kfake cluster (plain, or SASL for secure).
func kafkaAdmin(t *testing.T, c *kfake.Cluster) sarama.ClusterAdmin {
	t.Helper()
	cl := config.Cluster{BootstrapServers: c.ListenAddrs()}
	if c == env.secure {
		cl.SASL = &config.SASL{Mechanism: config.SASLSCRAMSHA512, Username: secureUser, PasswordFile: "password"}
	}
	admin, err := kafka.NewClusterAdmin(cl, kafka.WithFileReader(func(string) ([]byte, error) { return []byte(securePassword), nil }))
	if err != nil {
		t.Fatalf("while connecting a test admin: %v", err)
	}
	t.Cleanup(func() { _ = admin.Close() })
	return admin
}

// createTopic creates a topic with n partitions.
func createTopic(t *testing.T, admin sarama.ClusterAdmin, name string, n int32) {
	t.Helper()
	if err := admin.CreateTopic(name, &sarama.TopicDetail{NumPartitions: n, ReplicationFactor: 1}, false); err != nil {
		t.Fatalf("while creating topic %s: %v", name, err)
	}
}

// partitions returns the partition counts of the cluster's topics.
func partitions(admin sarama.ClusterAdmin) (map[string]int32, error) {
	topics, err := admin.ListTopics()
	if err != nil {
		return nil, err
	}
	out := map[string]int32{}
	for name, d := range topics {
		out[name] = d.NumPartitions
	}
	return out, nil
}
