//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kafka-mirror/kafka-mirror-operator/controllers"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/e2eharness"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/engineproc"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// operator is the KafkaMirror controller running against a real kube-apiserver and
// etcd (envtest), watching one namespace. There is no kubelet and no Deployment
// controller: a test that needs mirror pods runs a kubelet (below).
type operator struct {
	c  client.Client
	ns string
}

// startOperator starts envtest with the repository's CRDs and the operator's manager
// watching namespace ns (created here); both stop with the test. The manager's log
// goes to dir/operator.log.
func startOperator(t *testing.T, dir, ns string) *operator {
	t.Helper()
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		t.Fatal("KUBEBUILDER_ASSETS is not set: run `make e2e`, or `KUBEBUILDER_ASSETS=$(bash hack/envtest.sh)` " +
			"(hack/envtest.sh builds kube-apiserver and etcd from source once and prints where they are)")
	}
	testEnv := &envtest.Environment{CRDDirectoryPaths: []string{"../../config/crd/bases"}, ErrorIfCRDPathMissing: true}
	cfg, err := testEnv.Start()
	if err != nil {
		t.Fatalf("starting envtest: %v", err)
	}
	t.Cleanup(func() { _ = testEnv.Stop() })

	scheme, err := controllers.NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(dir, "operator.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = logFile.Close() })
	log := zapr.NewLogger(zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.Lock(logFile), zapcore.InfoLevel)))
	ctrl.SetLogger(log) // once per process: controller-runtime's first logger stays
	mgr, err := controllers.NewManager(cfg, controllers.ManagerOptions{
		Image:                        "kafka-mirror:e2e",
		WatchNamespaces:              []string{ns},
		MetricsAddress:               "0",
		HealthProbeAddress:           "0",
		SkipControllerNameValidation: true,
		Logger:                       log,
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
			t.Errorf("the operator's manager failed: %v", err)
		}
	})
	return &operator{c: c, ns: ns}
}

// kubelet plays the kubelet and the Deployment controller for one mirror Deployment:
// it runs as many engine processes as the Deployment's spec.replicas asks for, each
// from the mirror.yaml the operator rendered into the ConfigMap (with its own metrics
// port, as each pod has its own network namespace), stops the extra ones with SIGTERM
// (so they drain, as on a pod deletion), and writes the Deployment's status from the
// processes that run and answer /readyz.
type kubelet struct {
	s   *scenario
	c   client.Client
	key types.NamespacedName

	mu   sync.Mutex
	pods []*pod
	seq  int
	peak int
	// stops holds how each stopped engine exited.
	stops []string

	cancel context.CancelFunc
	done   chan struct{}
}

// pod is one engine process.
type pod struct {
	e       *engine
	metrics string
	ready   bool
}

// kubeletTick is how often the kubelet looks at the Deployment and probes the engines.
const kubeletTick = 250 * time.Millisecond

// podStopGrace is the termination grace period of the test's pods.
const podStopGrace = time.Minute

// startKubelet runs the engines of the Deployment key until the test ends.
func (s *scenario) startKubelet(c client.Client, key types.NamespacedName) *kubelet {
	ctx, cancel := context.WithCancel(context.Background())
	k := &kubelet{s: s, c: c, key: key, cancel: cancel, done: make(chan struct{})}
	go k.run(ctx)
	s.t.Cleanup(k.stop)
	return k
}

// stop stops the loop and every engine (SIGTERM); idempotent.
func (k *kubelet) stop() {
	k.cancel()
	<-k.done
}

func (k *kubelet) run(ctx context.Context) {
	defer close(k.done)
	tick := time.NewTicker(kubeletTick)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			k.mu.Lock()
			pods := k.pods
			k.pods = nil
			k.mu.Unlock()
			k.terminate(pods)
			return
		case <-tick.C:
		}
		k.sync(ctx)
	}
}

// sync makes the engines match the Deployment once and reports them in its status.
func (k *kubelet) sync(ctx context.Context) {
	t := k.s.t
	d := &appsv1.Deployment{}
	if err := k.c.Get(ctx, k.key, d); err != nil {
		return // not written yet, or the test is ending
	}
	want := 1
	if d.Spec.Replicas != nil {
		want = int(*d.Spec.Replicas)
	}
	k.mu.Lock()
	n := len(k.pods)
	k.mu.Unlock()
	for ; n < want; n++ {
		p, err := k.start(ctx, d)
		if err != nil {
			t.Errorf("kubelet: %v", err)
			return
		}
		k.mu.Lock()
		k.pods = append(k.pods, p)
		k.peak = max(k.peak, len(k.pods))
		k.mu.Unlock()
	}
	var extra []*pod
	k.mu.Lock()
	if len(k.pods) > want {
		// The newest pods go first, as a ReplicaSet picks the youngest.
		extra = append(extra, k.pods[want:]...)
		k.pods = k.pods[:want]
	}
	for _, p := range k.pods {
		if !p.e.Running() {
			t.Errorf("kubelet: engine %s exited (code %d); log tail:\n%s", p.e.Name, p.e.ExitCode(), p.e.LogTail(20))
			p.ready = false
			continue
		}
		if !p.ready {
			p.ready = readyz(ctx, p.metrics)
		}
	}
	pods := append([]*pod(nil), k.pods...)
	k.mu.Unlock()
	k.report(ctx, d, pods)
	k.terminate(extra)
}

// start launches one engine with the Deployment's current ConfigMap.
func (k *kubelet) start(ctx context.Context, d *appsv1.Deployment) (*pod, error) {
	var cmName, key string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "config" && v.ConfigMap != nil && len(v.ConfigMap.Items) == 1 {
			cmName, key = v.ConfigMap.Name, v.ConfigMap.Items[0].Key
		}
	}
	cm := &corev1.ConfigMap{}
	if err := k.c.Get(ctx, types.NamespacedName{Namespace: d.Namespace, Name: cmName}, cm); err != nil {
		return nil, fmt.Errorf("reading the mirror ConfigMap %q: %w", cmName, err)
	}
	cfg, err := config.Parse([]byte(cm.Data[key]))
	if err != nil {
		return nil, fmt.Errorf("parsing the rendered %s: %w", key, err)
	}
	addr, err := engineproc.FreeLoopbackAddress()
	if err != nil {
		return nil, err
	}
	cfg.Metrics.Address = addr
	data, err := config.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	k.seq++
	name := fmt.Sprintf("pod-%d", k.seq)
	k.mu.Unlock()
	path := filepath.Join(k.s.dir, name+".yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return nil, err
	}
	e, err := e2eharness.LaunchEngine(k.s.t, name, path)
	if err != nil {
		return nil, err
	}
	return &pod{e: e, metrics: addr}, nil
}

// terminate stops pods with SIGTERM, all at once, and waits for them to drain and exit.
func (k *kubelet) terminate(pods []*pod) {
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			err := p.e.Stop(podStopGrace)
			code := p.e.ExitCode()
			k.mu.Lock()
			k.stops = append(k.stops, fmt.Sprintf("%s: exit %d after %v", p.e.Name, code, time.Since(start).Round(time.Millisecond)))
			k.mu.Unlock()
			if err != nil || code != 0 {
				k.s.t.Errorf("kubelet: engine %s did not drain and exit cleanly on SIGTERM (exit %d, %v); log tail:\n%s", p.e.Name, code, err, p.e.LogTail(20))
			}
		}()
	}
	wg.Wait()
}

// report writes the Deployment status for pods, as the Deployment controller would.
func (k *kubelet) report(ctx context.Context, d *appsv1.Deployment, pods []*pod) {
	n, ready := int32(len(pods)), int32(0)
	for _, p := range pods {
		if p.ready {
			ready++
		}
	}
	st := appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: ready, AvailableReplicas: ready}
	if d.Status.ObservedGeneration == st.ObservedGeneration && d.Status.Replicas == n && d.Status.ReadyReplicas == ready &&
		d.Status.UpdatedReplicas == n && d.Status.AvailableReplicas == ready {
		return
	}
	d.Status = st
	if err := k.c.Status().Update(ctx, d); err != nil && !apierrors.IsConflict(err) && ctx.Err() == nil {
		k.s.t.Logf("kubelet: writing the Deployment status: %v", err)
	}
}

// running returns how many engines run and the most that ran at once.
func (k *kubelet) running() (n, peak int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.pods), k.peak
}

// readyz reports whether the engine's /readyz answers 200 OK.
func readyz(ctx context.Context, addr string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
