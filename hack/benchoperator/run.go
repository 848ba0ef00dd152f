package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/IBM/sarama"
	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kfake"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/controllers"
)

const (
	benchNamespace = "bench"
	benchTopic     = "bench-orders"
	// pollEvery is how often the driver looks at its watched view of the KafkaMirrors
	// while it waits; it reads through its own client, which the counters do not see.
	pollEvery = 200 * time.Millisecond
	// waitCeiling bounds every wait: far above anything the goal allows.
	waitCeiling = 10 * time.Minute
	// steadySampleEvery is how often the steady-state window samples the gauges.
	steadySampleEvery = 5 * time.Second
	// profileDir holds the CPU profiles of --profile.
	profileDir = "bin"
)

// result is what one run measured.
type result struct {
	started         time.Time
	createdToSynced time.Duration
	// createLoop is how long the driver took to create the KafkaMirrors (one at a time).
	createLoop    time.Duration
	creation      window
	steady        window
	change        latencies
	changeHanging latencies
	hangingWindow window
}

// window holds the operator's counters over a stretch of time.
type window struct {
	length          time.Duration
	reconciles      float64
	reconcileP50    time.Duration
	reconcileErrors float64
	// queueUnder1s and queueUnder10s are the shares of work-queue waits (from being
	// enqueued until a worker took it: workqueue_queue_duration_seconds, whose buckets
	// grow tenfold, so no finer quantile) under 1 s and under 10 s.
	queueUnder1s, queueUnder10s float64
	writes                      map[string]int64
	reads                       int64
	// apiLatency is the operator's API requests by verb: how many, and the time it
	// waited for them.
	apiLatency map[string]apiLatency
	kafkaConns int64
	cpu        time.Duration
	// controlPlaneCPU is the CPU time of kube-apiserver and etcd (by name).
	controlPlaneCPU map[string]time.Duration
	rssMiB          float64
	workersBusyMax  float64
	workers         float64
	queueDepthMax   float64
	// loadMin and loadMax are the machine's 1-minute load average, sampled every second.
	loadMin, loadMax float64
}

type latencies []time.Duration

func (l latencies) pct(p float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	s := append(latencies(nil), l...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

// counters are what the operator did, counted from outside it: API requests through a
// wrapping RoundTripper, Kafka connections accepted by the kfake listeners.
type counters struct {
	mu      sync.Mutex
	writes  map[string]int64
	reads   int64
	latency map[string]apiLatency
	conns   atomic.Int64
}

// apiLatency counts requests of one verb and the time the operator waited for them.
type apiLatency struct {
	n     int64
	total time.Duration
}

func (a apiLatency) sub(b apiLatency) apiLatency {
	return apiLatency{n: a.n - b.n, total: a.total - b.total}
}

func (c *counters) snapshot() (map[string]int64, int64, map[string]apiLatency) {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := make(map[string]int64, len(c.writes))
	for k, v := range c.writes {
		w[k] = v
	}
	l := make(map[string]apiLatency, len(c.latency))
	for k, v := range c.latency {
		l[k] = v
	}
	return w, c.reads, l
}

type countingTransport struct {
	next http.RoundTripper
	c    *counters
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.c.mu.Lock()
	switch req.Method {
	case http.MethodGet, http.MethodHead:
		t.c.reads++
	default:
		t.c.writes[req.Method+" "+resourceOf(req.URL.Path)]++
	}
	t.c.mu.Unlock()
	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	took := time.Since(start)
	t.c.mu.Lock()
	l := t.c.latency[req.Method]
	l.n++
	l.total += took
	t.c.latency[req.Method] = l
	t.c.mu.Unlock()
	return resp, err
}

// resourceOf names the resource of an API path: /apis/g/v/namespaces/ns/kafkamirrors/x/status -> kafkamirrors/status.
func resourceOf(path string) string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	for i, p := range parts {
		if p == "namespaces" && i+2 < len(parts) {
			rest := parts[i+2:]
			if len(rest) >= 3 {
				return rest[0] + "/" + rest[2]
			}
			return rest[0]
		}
	}
	return path
}

// countingListener counts the TCP connections a kfake broker accepts.
type countingListener struct {
	net.Listener
	n *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.n.Add(1)
	}
	return c, err
}

// hangingListener accepts TCP connections and never answers: the failure that holds a
// client until its read timeout, unlike a refused connection.
func hangingListener() (net.Listener, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go func() {
		var held []net.Conn
		for {
			c, err := ln.Accept()
			if err != nil {
				for _, c := range held {
					_ = c.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()
	return ln, nil
}

func run(ctx context.Context, o options) (*result, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, errors.New("KUBEBUILDER_ASSETS is not set: run `make bench-operator`, or KUBEBUILDER_ASSETS=$(bash hack/envtest.sh) go run ./hack/benchoperator")
	}
	// controller-runtime and client-go log nothing here: a real operator's logging costs
	// are not what this measures.
	ctrl.SetLogger(logr.Discard())
	testEnv := &envtest.Environment{CRDDirectoryPaths: []string{"config/crd/bases"}, ErrorIfCRDPathMissing: true}
	// Every KafkaMirror has a metrics Service: the default /24 of Service IPs holds
	// about 250.
	testEnv.ControlPlane.GetAPIServer().Configure().Set("service-cluster-ip-range", "10.96.0.0/16")
	cfg, err := testEnv.Start()
	if err != nil {
		return nil, fmt.Errorf("while starting envtest: %w", err)
	}
	defer func() { _ = testEnv.Stop() }()

	cnt := &counters{writes: map[string]int64{}, latency: map[string]apiLatency{}}
	listen := func(network, addr string) (net.Listener, error) {
		ln, err := net.Listen(network, addr)
		if err != nil {
			return nil, err
		}
		return countingListener{Listener: ln, n: &cnt.conns}, nil
	}
	source, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ListenFn(listen))
	if err != nil {
		return nil, fmt.Errorf("while starting the source cluster: %w", err)
	}
	defer source.Close()
	target, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ListenFn(listen))
	if err != nil {
		return nil, fmt.Errorf("while starting the target cluster: %w", err)
	}
	defer target.Close()
	if err := createTopic(source.ListenAddrs()); err != nil {
		return nil, err
	}
	var hanging []string
	for range o.hanging {
		ln, err := hangingListener()
		if err != nil {
			return nil, fmt.Errorf("while opening a hanging listener: %w", err)
		}
		defer ln.Close()
		hanging = append(hanging, ln.Addr().String())
	}

	scheme, err := controllers.NewScheme()
	if err != nil {
		return nil, err
	}
	driver, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("while creating the driver's client: %w", err)
	}
	if err := driver.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNamespace}}); err != nil {
		return nil, fmt.Errorf("while creating the namespace: %w", err)
	}

	// The operator's client config, as `kafka-mirror manager` builds it in a cluster,
	// with every request counted.
	opCfg := rest.CopyConfig(cfg)
	opCfg.QPS, opCfg.Burst = -1, 0
	opCfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return countingTransport{next: rt, c: cnt} }
	mgr, err := controllers.NewManager(opCfg, controllers.ManagerOptions{
		Image:              "example.com/kafka-mirror:bench",
		WatchNamespaces:    []string{benchNamespace},
		MetricsAddress:     "0",
		HealthProbeAddress: "0",
		Logger:             logr.Discard(),

		MaxConcurrentReconciles: o.workers,
	})
	if err != nil {
		return nil, err
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() {
		cancel()
		<-done
	}()

	view := watchFleet(mctx, driver)
	res := &result{started: time.Now()}
	fmt.Fprintf(os.Stderr, "bench-operator: creating %d KafkaMirrors\n", o.mirrors)
	stopProfile := func() {}
	if o.profile {
		if stopProfile, err = startCPUProfile(profileDir + "/operator-create-cpu.pprof"); err != nil {
			return nil, err
		}
		apiProfile := profileAPIServer(ctx, cfg, profileDir+"/apiserver-create-cpu.pprof", apiServerProfileLength)
		defer func() { <-apiProfile }()
	}
	smp, err := startSampling(cnt, time.Second)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	for i := range o.mirrors {
		if err := driver.Create(ctx, benchMirror(fmt.Sprintf("m-%04d", i), source.ListenAddrs(), target.ListenAddrs(), o.syncInterval)); err != nil {
			return nil, fmt.Errorf("while creating KafkaMirror %d: %w", i, err)
		}
	}
	res.createLoop = time.Since(start)
	last, werr := waitSynced(ctx, view, o.mirrors)
	res.createdToSynced = last.Sub(start)
	res.creation, err = smp.finish()
	stopProfile()
	if err := errors.Join(werr, err); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "bench-operator: %d KafkaMirrors synced in %s; steady state for %s\n", o.mirrors, res.createdToSynced.Round(time.Millisecond), o.steady)

	// envtest runs no Deployment controller: without this every mirror would stay not
	// ready and be looked at again every 15 s, which is not the fleet the steady state
	// is about.
	fmt.Fprintf(os.Stderr, "bench-operator: marking the mirror Deployments available\n")
	if err := markDeploymentsReady(ctx, driver); err != nil {
		return nil, err
	}
	if err := waitReady(ctx, view, o.mirrors); err != nil {
		return nil, err
	}

	// Let the first round of sync-interval requeues spread out before counting.
	if err := sleep(ctx, min(o.syncInterval, 5*time.Second)); err != nil {
		return nil, err
	}
	stopProfile = func() {}
	if o.profile {
		if stopProfile, err = startCPUProfile(profileDir + "/operator-steady-cpu.pprof"); err != nil {
			return nil, err
		}
	}
	res.steady, err = measure(ctx, cnt, o.steady, steadySampleEvery)
	stopProfile()
	if err != nil {
		return nil, err
	}

	fmt.Fprintf(os.Stderr, "bench-operator: spec change on %d KafkaMirrors\n", o.changes)
	if res.change, err = changeSpecs(ctx, driver, view, o.changes, 1); err != nil {
		return nil, err
	}

	if o.hanging > 0 {
		fmt.Fprintf(os.Stderr, "bench-operator: %d KafkaMirrors on hanging clusters, then a spec change on %d\n", o.hanging, o.changes)
		for i, addr := range hanging {
			if err := driver.Create(ctx, benchMirror(fmt.Sprintf("hang-%02d", i), []string{addr}, target.ListenAddrs(), o.syncInterval)); err != nil {
				return nil, fmt.Errorf("while creating a hanging KafkaMirror: %w", err)
			}
		}
		if err := sleep(ctx, o.settle); err != nil {
			return nil, err
		}
		var werr error
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			res.hangingWindow, werr = measure(ctx, cnt, o.steady, time.Second)
		}()
		res.changeHanging, err = changeSpecs(ctx, driver, view, o.changes, 2)
		wg.Wait()
		if err := errors.Join(err, werr); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// apiServerProfileLength is how long --profile profiles kube-apiserver from the first
// create: its /debug/pprof/profile answers only at the end, so it is fixed in advance.
const apiServerProfileLength = 40 * time.Second

// profileAPIServer fetches a CPU profile of kube-apiserver over d into path, in the
// background (envtest's admin user may read /debug/pprof); the channel is closed when
// it is written or failed.
func profileAPIServer(ctx context.Context, cfg *rest.Config, path string, d time.Duration) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		cs, err := kubernetes.NewForConfig(cfg)
		if err == nil {
			var b []byte
			b, err = cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
				Param("seconds", fmt.Sprint(int(d.Seconds()))).Timeout(d + time.Minute).DoRaw(ctx)
			if err == nil {
				err = os.WriteFile(path, b, 0o644)
			}
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench-operator: profiling kube-apiserver:", err)
		}
	}()
	return done
}

// startCPUProfile profiles the process into path until the returned func is called
// (once; later calls do nothing).
func startCPUProfile(path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("while creating the profile directory: %w", err)
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("while creating the CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("while starting the CPU profile: %w", err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			pprof.StopCPUProfile()
			_ = f.Close()
		})
	}, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func createTopic(addrs []string) error {
	sc := sarama.NewConfig()
	sc.Version = sarama.V3_6_0_0
	admin, err := sarama.NewClusterAdmin(addrs, sc)
	if err != nil {
		return fmt.Errorf("while connecting to the source: %w", err)
	}
	defer admin.Close()
	if err := admin.CreateTopic(benchTopic, &sarama.TopicDetail{NumPartitions: 3, ReplicationFactor: 1}, false); err != nil {
		return fmt.Errorf("while creating %s: %w", benchTopic, err)
	}
	return nil
}

func benchMirror(name string, source, target []string, sync time.Duration) *v1alpha1.KafkaMirror {
	return &v1alpha1.KafkaMirror{
		ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: name},
		Spec: v1alpha1.KafkaMirrorSpec{
			Source:            v1alpha1.ClusterSpec{BootstrapServers: source},
			Target:            v1alpha1.ClusterSpec{BootstrapServers: target},
			Topics:            v1alpha1.TopicsSpec{Include: []string{"bench-.*"}},
			TopicSyncInterval: &metav1.Duration{Duration: sync},
		},
	}
}

// synced tells whether m's topics were synced for its current generation.
func synced(m *v1alpha1.KafkaMirror) bool {
	c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConditionTopicsSynced)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == m.Generation
}

// fleet is the driver's view of the KafkaMirrors, kept by one list and a watch (listed
// again if the watch ends): waiting for 1,000 KafkaMirrors by listing them all every
// 200 ms, as this program first did, cost the API server and this process more CPU
// than the operator's own reconciles while they were created.
type fleet struct {
	mu    sync.Mutex
	state map[string]mirrorView
}

// mirrorView is what the driver knows of one KafkaMirror.
type mirrorView struct {
	streams int32
	// syncedAt is when the driver first saw TopicsSynced=True for generation.
	generation int64
	syncedAt   time.Time
	ready      bool
}

func watchFleet(ctx context.Context, c client.WithWatch) *fleet {
	f := &fleet{state: map[string]mirrorView{}}
	go func() {
		for ctx.Err() == nil {
			if err := f.follow(ctx, c); err != nil && ctx.Err() == nil {
				fmt.Fprintln(os.Stderr, "bench-operator: watching KafkaMirrors:", err)
				_ = sleep(ctx, time.Second)
			}
		}
	}()
	return f
}

// follow lists the KafkaMirrors, then follows their changes until the watch ends.
func (f *fleet) follow(ctx context.Context, c client.WithWatch) error {
	var list v1alpha1.KafkaMirrorList
	if err := c.List(ctx, &list, client.InNamespace(benchNamespace)); err != nil {
		return fmt.Errorf("while listing: %w", err)
	}
	for i := range list.Items {
		f.see(&list.Items[i])
	}
	w, err := c.Watch(ctx, &v1alpha1.KafkaMirrorList{}, client.InNamespace(benchNamespace),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true}})
	if err != nil {
		return fmt.Errorf("while watching: %w", err)
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		switch ev.Type {
		case watch.Added, watch.Modified:
			if m, ok := ev.Object.(*v1alpha1.KafkaMirror); ok {
				f.see(m)
			}
		case watch.Error:
			return fmt.Errorf("watch error: %v", apierrors.FromObject(ev.Object))
		}
	}
	return nil
}

func (f *fleet) see(m *v1alpha1.KafkaMirror) {
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	v := f.state[m.Name]
	if v.generation != m.Generation {
		v = mirrorView{generation: m.Generation}
	}
	v.streams = m.Spec.Streams
	if synced(m) && v.syncedAt.IsZero() {
		v.syncedAt = now
	}
	c := meta.FindStatusCondition(m.Status.Conditions, v1alpha1.ConditionReady)
	v.ready = c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == m.Generation
	f.state[m.Name] = v
}

// syncedMirrors counts the KafkaMirrors named m-* that are synced, and returns when the
// last of them was seen synced.
func (f *fleet) syncedMirrors() (int, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, last := 0, time.Time{}
	for name, v := range f.state {
		if strings.HasPrefix(name, "m-") && !v.syncedAt.IsZero() {
			n++
			if v.syncedAt.After(last) {
				last = v.syncedAt
			}
		}
	}
	return n, last
}

func (f *fleet) readyMirrors() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for name, v := range f.state {
		if strings.HasPrefix(name, "m-") && v.ready {
			n++
		}
	}
	return n
}

func (f *fleet) view(name string) mirrorView {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.state[name]
}

// waitSynced waits until n KafkaMirrors named m-* are synced, and returns when the last
// of them was seen synced.
func waitSynced(ctx context.Context, f *fleet, n int) (time.Time, error) {
	deadline := time.Now().Add(waitCeiling)
	for {
		got, last := f.syncedMirrors()
		if got >= n {
			return last, nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("only %d of %d KafkaMirrors synced after %s", got, n, waitCeiling)
		}
		if err := sleep(ctx, pollEvery); err != nil {
			return time.Time{}, err
		}
	}
}

// waitReady waits until n KafkaMirrors named m-* are Ready.
func waitReady(ctx context.Context, f *fleet, n int) error {
	deadline := time.Now().Add(waitCeiling)
	for {
		got := f.readyMirrors()
		if got >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d KafkaMirrors ready after %s", got, n, waitCeiling)
		}
		if err := sleep(ctx, pollEvery); err != nil {
			return err
		}
	}
}

// markDeploymentsReady plays the Deployment controller, which envtest does not run: it
// reports every Deployment in the bench namespace as rolled out with all its replicas
// available (a few writes at a time).
func markDeploymentsReady(ctx context.Context, c client.Client) error {
	var list appsv1.DeploymentList
	if err := c.List(ctx, &list, client.InNamespace(benchNamespace)); err != nil {
		return fmt.Errorf("while listing the Deployments: %w", err)
	}
	const writers = 4
	work := make(chan *appsv1.Deployment)
	errs := make(chan error, writers)
	for range writers {
		go func() {
			var first error
			for d := range work {
				n := int32(1)
				if d.Spec.Replicas != nil {
					n = *d.Spec.Replicas
				}
				d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
					Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"}}}
				if err := c.Status().Update(ctx, d); err != nil && first == nil {
					first = fmt.Errorf("while marking Deployment %s available: %w", d.Name, err)
				}
			}
			errs <- first
		}()
	}
	for i := range list.Items {
		work <- &list.Items[i]
	}
	close(work)
	var all error
	for range writers {
		all = errors.Join(all, <-errs)
	}
	return all
}

// changeSpecs changes spec.streams of the first n KafkaMirrors (a change that re-renders
// mirror.yaml and re-runs the topic sync) and returns, per mirror, the time from its
// update to TopicsSynced=True for the new generation.
func changeSpecs(ctx context.Context, c client.Client, f *fleet, n int, streams int32) (latencies, error) {
	updated := map[string]time.Time{}
	for i := range n {
		m := &v1alpha1.KafkaMirror{}
		name := fmt.Sprintf("m-%04d", i)
		if err := c.Get(ctx, client.ObjectKey{Namespace: benchNamespace, Name: name}, m); err != nil {
			return nil, fmt.Errorf("while reading %s: %w", name, err)
		}
		m.Spec.Streams = streams + 1
		if err := c.Update(ctx, m); err != nil {
			return nil, fmt.Errorf("while updating %s: %w", name, err)
		}
		updated[name] = time.Now()
	}
	var out latencies
	deadline := time.Now().Add(waitCeiling)
	for len(updated) > 0 {
		for name, at := range updated {
			if v := f.view(name); v.streams == streams+1 && !v.syncedAt.IsZero() {
				out = append(out, v.syncedAt.Sub(at))
				delete(updated, name)
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d spec changes not reconciled after %s", len(updated), waitCeiling)
		}
		if err := sleep(ctx, pollEvery/2); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// measure samples the operator's counters over d, and its gauges every every.
func measure(ctx context.Context, cnt *counters, d, every time.Duration) (window, error) {
	smp, err := startSampling(cnt, every)
	if err != nil {
		return window{}, err
	}
	serr := sleep(ctx, d)
	w, err := smp.finish()
	return w, errors.Join(serr, err)
}

// sampler measures a window of unknown length: startSampling takes the counters, a
// goroutine samples the gauges (workers busy, queue depth, load) every second, finish
// takes the counters again. Sampling gathers the whole metrics registry (1,000
// KafkaMirrors have thousands of series): the steady state samples less often, since
// its cost counts as the operator's CPU.
type sampler struct {
	cnt      *counters
	begun    time.Time
	w0       map[string]int64
	r0       int64
	lat0     map[string]apiLatency
	k0       int64
	cpu0     time.Duration
	plane0   map[string]time.Duration
	m0       reconcileSample
	stop     chan struct{}
	done     chan struct{}
	mu       sync.Mutex
	busyMax  float64
	workers  float64
	queueMax float64
	loadMin  float64
	loadMax  float64
}

func startSampling(cnt *counters, every time.Duration) (*sampler, error) {
	m0, err := reconcileMetrics()
	if err != nil {
		return nil, err
	}
	s := &sampler{cnt: cnt, begun: time.Now(), k0: cnt.conns.Load(), cpu0: cpuTime(), plane0: controlPlaneCPU(), m0: m0,
		stop: make(chan struct{}), done: make(chan struct{}), loadMin: loadAverage(), loadMax: loadAverage()}
	s.w0, s.r0, s.lat0 = cnt.snapshot()
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
			g, err := reconcileMetrics()
			l := loadAverage()
			s.mu.Lock()
			if err == nil {
				s.busyMax, s.queueMax, s.workers = max(s.busyMax, g.busy), max(s.queueMax, g.queue), g.workers
			}
			s.loadMin, s.loadMax = min(s.loadMin, l), max(s.loadMax, l)
			s.mu.Unlock()
		}
	}()
	return s, nil
}

// finish ends the window and returns what happened in it.
func (s *sampler) finish() (window, error) {
	close(s.stop)
	<-s.done
	w1, r1, lat1 := s.cnt.snapshot()
	m1, err := reconcileMetrics()
	if err != nil {
		return window{}, err
	}
	plane1 := controlPlaneCPU()
	out := window{
		length:          time.Since(s.begun),
		reconciles:      m1.total - s.m0.total,
		reconcileErrors: m1.errors - s.m0.errors,
		reconcileP50:    histogramQuantile(0.5, s.m0.buckets, m1.buckets),
		queueUnder1s:    histogramShare(1, s.m0.queueBuckets, m1.queueBuckets),
		queueUnder10s:   histogramShare(10, s.m0.queueBuckets, m1.queueBuckets),
		writes:          map[string]int64{},
		reads:           r1 - s.r0,
		apiLatency:      map[string]apiLatency{},
		kafkaConns:      s.cnt.conns.Load() - s.k0,
		cpu:             cpuTime() - s.cpu0,
		controlPlaneCPU: map[string]time.Duration{},
		rssMiB:          rssMiB(),
		workersBusyMax:  s.busyMax,
		workers:         m1.workers,
		queueDepthMax:   s.queueMax,
		loadMin:         s.loadMin,
		loadMax:         s.loadMax,
	}
	for k, v := range w1 {
		if dv := v - s.w0[k]; dv > 0 {
			out.writes[k] = dv
		}
	}
	for k, v := range lat1 {
		if dv := v.sub(s.lat0[k]); dv.n > 0 {
			out.apiLatency[k] = dv
		}
	}
	for k, v := range plane1 {
		out.controlPlaneCPU[k] = v - s.plane0[k]
	}
	return out, nil
}

// cpuTime is the user and system CPU time of this process: the operator, the kfake
// clusters and the (idle while measuring) driver; kube-apiserver and etcd run apart.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// controlPlaneCPU is the CPU time (user and system) of this process's children named
// kube-apiserver and etcd: envtest's control plane, which shares the machine's cores
// with the operator.
func controlPlaneCPU() map[string]time.Duration {
	out := map[string]time.Duration{}
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return out
	}
	self := os.Getpid()
	for _, d := range dirs {
		b, err := os.ReadFile("/proc/" + d.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ... utime stime: fields 14 and 15, in clock ticks.
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		comm := s[open+1 : end]
		if comm != "kube-apiserver" && comm != "etcd" {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) < 13 {
			continue
		}
		var ppid int
		var utime, stime int64
		_, _ = fmt.Sscan(f[1], &ppid)
		_, _ = fmt.Sscan(f[11], &utime)
		_, _ = fmt.Sscan(f[12], &stime)
		if ppid != self {
			continue
		}
		out[comm] += time.Duration(utime+stime) * time.Second / clockTicks
	}
	return out
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times: 100 on Linux.
const clockTicks = 100

// loadAverage is the machine's 1-minute load average: the benchmark shares the machine,
// and its latencies say little without it.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	var l float64
	_, _ = fmt.Sscanf(string(b), "%f", &l)
	return l
}

// rssMiB is this process's resident set size from /proc/self/status.
func rssMiB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			var kb float64
			_, _ = fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(line, "VmRSS:")), "%f", &kb)
			return kb / 1024
		}
	}
	return 0
}

type reconcileSample struct {
	total, errors float64
	buckets       map[float64]float64
	queueBuckets  map[float64]float64
	busy, queue   float64
	workers       float64
}

// reconcileMetrics reads controller-runtime's own metrics of the kafkamirror controller.
func reconcileMetrics() (reconcileSample, error) {
	mfs, err := crmetrics.Registry.Gather()
	if err != nil {
		return reconcileSample{}, fmt.Errorf("while reading the controller metrics: %w", err)
	}
	s := reconcileSample{buckets: map[float64]float64{}, queueBuckets: map[float64]float64{}}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			isController := false
			for _, l := range m.GetLabel() {
				if (l.GetName() == "controller" || l.GetName() == "name") && l.GetValue() == "kafkamirror" {
					isController = true
				}
			}
			if !isController {
				continue
			}
			switch mf.GetName() {
			case "controller_runtime_reconcile_total":
				s.total += m.GetCounter().GetValue()
			case "controller_runtime_reconcile_errors_total":
				s.errors += m.GetCounter().GetValue()
			case "controller_runtime_reconcile_time_seconds":
				for _, b := range m.GetHistogram().GetBucket() {
					s.buckets[b.GetUpperBound()] += float64(b.GetCumulativeCount())
				}
			case "controller_runtime_max_concurrent_reconciles":
				s.workers = m.GetGauge().GetValue()
			case "controller_runtime_active_workers":
				s.busy = m.GetGauge().GetValue()
			case "workqueue_depth":
				s.queue = m.GetGauge().GetValue()
			case "workqueue_queue_duration_seconds":
				for _, b := range m.GetHistogram().GetBucket() {
					s.queueBuckets[b.GetUpperBound()] += float64(b.GetCumulativeCount())
				}
			}
		}
	}
	return s, nil
}

// histogramQuantile estimates quantile q of the observations made between two samples
// of a cumulative histogram, linearly within the bucket it falls in.
func histogramQuantile(q float64, before, after map[float64]float64) time.Duration {
	bounds := make([]float64, 0, len(after))
	for b := range after {
		bounds = append(bounds, b)
	}
	sort.Float64s(bounds)
	if len(bounds) == 0 {
		return 0
	}
	total := after[bounds[len(bounds)-1]] - before[bounds[len(bounds)-1]]
	if total == 0 {
		return 0
	}
	rank, lower, below := q*total, 0.0, 0.0
	for _, b := range bounds {
		cum := after[b] - before[b]
		if cum >= rank {
			if cum == below {
				return seconds(b)
			}
			return seconds(lower + (b-lower)*(rank-below)/(cum-below))
		}
		lower, below = b, cum
	}
	return seconds(lower)
}

// histogramShare is the share of the observations made between two samples of a
// cumulative histogram that were at most bound (a bucket's upper bound).
func histogramShare(bound float64, before, after map[float64]float64) float64 {
	var top float64
	for b := range after {
		top = max(top, b)
	}
	total := after[top] - before[top]
	if total == 0 {
		return 0
	}
	return (after[bound] - before[bound]) / total
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func perMinute(n float64, d time.Duration) float64 { return n / d.Minutes() }

func (r *result) markdown(o options) string {
	var b strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "### %s\n\n", o.label)
	fmt.Fprintf(&b, "Run %s on %s (%d CPUs, %s): `go run ./hack/benchoperator --mirrors %d --hanging %d --changes %d --steady %s --sync-interval %s%s%s`; "+
		"KafkaMirrors with one source topic (3 partitions) on one pair of kfake clusters, topicSyncInterval %s, %.0f workers (MaxConcurrentReconciles), logs discarded; after creation the driver marks the mirror Deployments available (envtest runs no Deployment controller), so the steady state is a healthy fleet.\n\n",
		r.started.UTC().Format(time.RFC3339), host, runtime.NumCPU(), runtime.Version(), o.mirrors, o.hanging, o.changes, o.steady, o.syncInterval, workersFlag(o), profileFlag(o), o.syncInterval, r.creation.workers)
	fmt.Fprintf(&b, "| measure | value |\n|---|---|\n")
	fmt.Fprintf(&b, "| created -> all TopicsSynced | %s |\n", r.createdToSynced.Round(100*time.Millisecond))
	c := r.creation
	fmt.Fprintf(&b, "| creation: the driver's create loop (one at a time) | %s |\n", r.createLoop.Round(100*time.Millisecond))
	fmt.Fprintf(&b, "| creation: reconciles | %.0f (%.1f per mirror), p50 %s, errors %.0f; queue waits under 1 s %.0f%%, under 10 s %.0f%%; at most %.0f of %.0f workers busy, queue depth up to %.0f |\n",
		c.reconciles, c.reconciles/float64(o.mirrors), c.reconcileP50.Round(100*time.Microsecond), c.reconcileErrors,
		100*c.queueUnder1s, 100*c.queueUnder10s, c.workersBusyMax, c.workers, c.queueDepthMax)
	fmt.Fprintf(&b, "| creation: API writes | %d (%.1f per mirror: %s); reads %d |\n", sum(c.writes), float64(sum(c.writes))/float64(o.mirrors), counts(c.writes), c.reads)
	fmt.Fprintf(&b, "| creation: operator's wait for the API server | %s |\n", waits(c.apiLatency))
	fmt.Fprintf(&b, "| creation: CPU seconds in the window | operator + kfake %.1f, kube-apiserver %.1f, etcd %.1f (the machine had %.0f); load average %.1f-%.1f |\n",
		c.cpu.Seconds(), c.controlPlaneCPU["kube-apiserver"].Seconds(), c.controlPlaneCPU["etcd"].Seconds(),
		c.length.Seconds()*float64(runtime.NumCPU()), c.loadMin, c.loadMax)
	s := r.steady
	fmt.Fprintf(&b, "| steady state: reconciles | %.0f/min (%.1f/min per mirror), p50 %s, errors %.0f |\n",
		perMinute(s.reconciles, s.length), perMinute(s.reconciles, s.length)/float64(o.mirrors), s.reconcileP50.Round(100*time.Microsecond), s.reconcileErrors)
	fmt.Fprintf(&b, "| steady state: API writes | %.0f/min (%s); reads %.0f/min |\n", perMinute(float64(sum(s.writes)), s.length), writes(s), perMinute(float64(s.reads), s.length))
	fmt.Fprintf(&b, "| steady state: Kafka connections opened | %.0f/min |\n", perMinute(float64(s.kafkaConns), s.length))
	fmt.Fprintf(&b, "| steady state: CPU (operator + in-process kfake) | %.1f%% of a core |\n", 100*s.cpu.Seconds()/s.length.Seconds())
	fmt.Fprintf(&b, "| steady state: RSS (operator + kfake + driver) | %.0f MiB |\n", s.rssMiB)
	fmt.Fprintf(&b, "| steady state: machine load average (1 min, %d CPUs) | %.1f-%.1f |\n", runtime.NumCPU(), s.loadMin, s.loadMax)
	fmt.Fprintf(&b, "| spec change on %d mirrors -> TopicsSynced | p50 %s, max %s |\n", len(r.change), r.change.pct(0.5).Round(10*time.Millisecond), r.change.pct(1).Round(10*time.Millisecond))
	if o.hanging > 0 {
		h := r.hangingWindow
		fmt.Fprintf(&b, "| same, with %d mirrors on hanging clusters | p50 %s, max %s |\n", o.hanging, r.changeHanging.pct(0.5).Round(10*time.Millisecond), r.changeHanging.pct(1).Round(10*time.Millisecond))
		fmt.Fprintf(&b, "| with hanging clusters: reconciles, workers busy, queue | %.0f/min, p50 %s; at most %.0f of %.0f workers busy, queue depth up to %.0f |\n",
			perMinute(h.reconciles, h.length), h.reconcileP50.Round(100*time.Microsecond), h.workersBusyMax, h.workers, h.queueDepthMax)
		fmt.Fprintf(&b, "| with hanging clusters: CPU, Kafka connections | %.1f%% of a core, %.0f/min |\n", 100*h.cpu.Seconds()/h.length.Seconds(), perMinute(float64(h.kafkaConns), h.length))
	}
	b.WriteString("\n")
	return b.String()
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

func workersFlag(o options) string {
	if o.workers > 0 {
		return fmt.Sprintf(" --workers %d", o.workers)
	}
	return ""
}

func profileFlag(o options) string {
	if o.profile {
		return " --profile"
	}
	return ""
}

// counts lists a count per key, sorted by key.
func counts(m map[string]int64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// waits lists, per verb, the requests and the mean time the operator waited for each.
func waits(m map[string]apiLatency) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		l := m[k]
		parts = append(parts, fmt.Sprintf("%s %d, mean %s (%.1f s in all)", k, l.n, (l.total/time.Duration(l.n)).Round(100*time.Microsecond), l.total.Seconds()))
	}
	if len(parts) == 0 {
		return "no requests"
	}
	return strings.Join(parts, "; ")
}

func writes(w window) string {
	if len(w.writes) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(w.writes))
	for k := range w.writes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, perMinute(float64(w.writes[k]), w.length)))
	}
	return strings.Join(parts, ", ")
}
