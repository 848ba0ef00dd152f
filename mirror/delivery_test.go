package mirror

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// faultyNetwork wraps a kfake cluster's listeners so that a test can cut the cluster off
// (close every connection and refuse new ones, as a network partition or a dead broker
// does) or lose its responses (requests are read and handled, the connection is closed
// when the broker writes the answer: the record is written but its ack never arrives).
type faultyNetwork struct {
	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	cut      atomic.Bool
	dropAcks atomic.Bool
	cuts     atomic.Int64 // connections closed by a fault
}

func newFaultyNetwork() *faultyNetwork {
	return &faultyNetwork{conns: map[net.Conn]struct{}{}}
}

// opt is the kfake option that puts the faulty network in front of every broker.
func (f *faultyNetwork) opt() kfake.Opt {
	return kfake.ListenFn(func(network, address string) (net.Listener, error) {
		ln, err := net.Listen(network, address)
		if err != nil {
			return nil, err
		}
		return &faultyListener{Listener: ln, f: f}, nil
	})
}

// setCut cuts the cluster off (closing every open connection) or lets it answer again.
func (f *faultyNetwork) setCut(cut bool) {
	f.cut.Store(cut)
	if !cut {
		return
	}
	f.mu.Lock()
	var open []net.Conn
	for c := range f.conns {
		open = append(open, c)
	}
	f.mu.Unlock()
	for _, c := range open {
		_ = c.Close()
		f.cuts.Add(1)
	}
}

type faultyListener struct {
	net.Listener
	f *faultyNetwork
}

func (l *faultyListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.f.cut.Load() {
			_ = c.Close()
			l.f.cuts.Add(1)
			continue
		}
		fc := &faultyConn{Conn: c, f: l.f}
		l.f.mu.Lock()
		l.f.conns[fc] = struct{}{}
		l.f.mu.Unlock()
		return fc, nil
	}
}

type faultyConn struct {
	net.Conn
	f *faultyNetwork
}

func (c *faultyConn) Write(b []byte) (int, error) {
	if c.f.dropAcks.Load() || c.f.cut.Load() {
		_ = c.Close()
		c.f.cuts.Add(1)
		return 0, io.ErrClosedPipe
	}
	return c.Conn.Write(b)
}

func (c *faultyConn) Close() error {
	c.f.mu.Lock()
	delete(c.f.conns, c)
	c.f.mu.Unlock()
	return c.Conn.Close()
}

// TestTargetFaultsAreRiddenOutInOrder cuts the target off for a few seconds, and then
// loses its acks for a few seconds, while records flow, both within deliveryTimeout.
// The engine must keep running (no send error), lose nothing and keep every
// partition's order: sarama may not hand a record back as failed just because it
// could not find the partition's leader for a moment.
func TestTargetFaultsAreRiddenOutInOrder(t *testing.T) {
	tests := map[string]struct {
		fault func(f *faultyNetwork, on bool)
	}{
		"target unreachable for 3s": {fault: func(f *faultyNetwork, on bool) { f.setCut(on) }},
		"acks lost for 3s":          {fault: func(f *faultyNetwork, on bool) { f.dropAcks.Store(on) }},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			const partitions = 8
			f := newFaultyNetwork()
			c := newClusters(t, partitions, f.opt())
			w := newWorkload(partitions)
			w.produce(t, c.source, 500)
			r := startEngine(t, c.testConfig(t, func(cfg *config.Config) { cfg.MaxInFlightPerPartition = 200 }), testLogger(t))
			testutil.WaitFor(t, 60*time.Second, "4000 records mirrored", func() bool { return r.e.Stats().Records >= 4000 })

			stop := w.background(t, c.source, 50, 20*time.Millisecond)
			time.Sleep(300 * time.Millisecond)
			before := r.e.Stats().Records
			tc.fault(f, true)
			time.Sleep(3 * time.Second)
			tc.fault(f, false)
			stop()
			w.produce(t, c.source, 100)

			got := readTarget(t, c.target, testTopic, w.total(), 2*time.Second, 2*time.Minute)
			res := audit(t, w, got, true, true)
			select {
			case <-r.done:
				t.Fatalf("the engine stopped during the fault: %v", r.err)
			default:
			}
			s := r.e.Stats()
			if res.missing != 0 || s.SendErrors != 0 || f.cuts.Load() == 0 {
				t.Fatalf("%d missing, %d send errors, %d connections cut; want 0, 0, > 0", res.missing, s.SendErrors, f.cuts.Load())
			}
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: %d connections cut, %d records mirrored before the fault, %d on the target for %d, 0 lost, %d duplicates, order kept",
				name, f.cuts.Load(), before, res.records, w.total(), res.duplicates)
		})
	}
}

// TestDeliveryTimeoutStopsPromptly cuts the target off for good. The engine must not
// give up before deliveryTimeout, then stop with an error naming the target, and return
// promptly instead of waiting its whole drain limit for a producer that cannot deliver.
func TestDeliveryTimeoutStopsPromptly(t *testing.T) {
	const partitions = 4
	const deliveryTimeout = 2 * time.Second
	f := newFaultyNetwork()
	c := newClusters(t, partitions, f.opt())
	w := newWorkload(partitions)
	w.produce(t, c.source, 500)
	cfg := c.testConfig(t, func(cfg *config.Config) { cfg.DeliveryTimeout = config.Duration{Duration: deliveryTimeout} })
	// The drain limit is far longer than the stop may take.
	r := startEngine(t, cfg, testLogger(t), WithDrainTimeout(20*time.Second))
	testutil.WaitFor(t, 60*time.Second, "2000 records mirrored", func() bool { return r.e.Stats().Records >= 2000 })

	f.setCut(true)
	cut := time.Now()
	w.produce(t, c.source, 500)
	failedAtCh := make(chan time.Time, 1)
	go func() {
		<-r.e.failed
		failedAtCh <- time.Now()
	}()
	// A generous ceiling from the configuration: the watch gives up one tick after
	// deliveryTimeout, and the fatal stop waits at most fatalDrainLimit for the producer.
	ceiling := 3 * (deliveryTimeout + time.Second + fatalDrainLimit + commitAllowance)
	err := r.wait(t, 2*ceiling)
	returned := time.Since(cut)
	var failedAt time.Time
	select {
	case failedAt = <-failedAtCh:
	case <-time.After(time.Second):
	}
	if err == nil || !strings.Contains(err.Error(), "target") {
		t.Fatalf("Run = %v, want an error naming the target", err)
	}
	if gaveUp := failedAt.Sub(cut); failedAt.IsZero() || gaveUp < deliveryTimeout {
		t.Fatalf("the engine gave up %v after the cut, before deliveryTimeout %v: %v", gaveUp, deliveryTimeout, err)
	}
	if returned > ceiling {
		t.Fatalf("Run returned %v after the cut, want within %v", returned, ceiling)
	}

	// Nothing committed past what the target holds; the restart mirrors the rest.
	committed := testutil.CommittedOffsets(t, c.source.ListenAddrs(), "mirror-test", testTopic, partitions)
	// The failed engine's producer may still be retrying in the background. In a real
	// restart its process is gone; in this one process its late writes would land
	// between the restarted engine's, so the test waits for it to end (Closed), bounded
	// by three times its retry budget (deliveryTimeout) plus sarama's read timeout.
	closeCeiling := 3 * (deliveryTimeout + 30*time.Second)
	select {
	case <-r.e.Closed():
	case <-time.After(closeCeiling):
		t.Fatalf("the failed engine's producer and clients had not closed %v after Run returned", closeCeiling)
	}
	f.setCut(false)
	have := readTarget(t, c.target, testTopic, 0, time.Second, 20*time.Second)
	for p := int32(0); p < partitions; p++ {
		if committed[p] > int64(len(have[p])) {
			t.Fatalf("partition %d: committed %d, but the target holds only %d records", p, committed[p], len(have[p]))
		}
	}
	second := startEngine(t, cfg, testLogger(t))
	got := readTarget(t, c.target, testTopic, w.total(), 2*time.Second, 2*time.Minute)
	if res := audit(t, w, got, false, true); res.missing != 0 {
		t.Fatalf("after the restart %d records are missing", res.missing)
	}
	if err := second.stop(t); err != nil {
		t.Fatal(err)
	}
	t.Logf("gave up %v after the cut, Run returned after %v: %v", failedAt.Sub(cut).Round(10*time.Millisecond), returned.Round(10*time.Millisecond), err)
}

// TestStartRetriesWhileTargetUnreachable starts the engine while the target is cut
// off. It must keep retrying (not return), serve /healthz, answer /readyz 503 naming
// the target, and mirror everything once the target answers.
func TestStartRetriesWhileTargetUnreachable(t *testing.T) {
	const partitions = 2
	f := newFaultyNetwork()
	c := newClusters(t, partitions, f.opt())
	w := newWorkload(partitions)
	w.produce(t, c.source, 300)
	f.setCut(true)
	cfg := c.testConfig(t, func(cfg *config.Config) { cfg.Metrics.Address = "127.0.0.1:0" })
	r := startEngine(t, cfg, testLogger(t))

	var addr string
	testutil.WaitFor(t, 90*time.Second, "the HTTP endpoint", func() bool { addr = r.e.httpAddr(); return addr != "" })
	time.Sleep(2500 * time.Millisecond) // at least two attempts
	select {
	case <-r.done:
		t.Fatalf("Run returned while the target was unreachable: %v", r.err)
	default:
	}
	if code, _ := httpGet(t, "http://"+addr+"/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz = %d while connecting, want 200", code)
	}
	code, body := httpGet(t, "http://"+addr+"/readyz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "while connecting to the target cluster") {
		t.Fatalf("/readyz = %d %q while the target is unreachable, want 503 naming the target cluster", code, body)
	}

	f.setCut(false)
	got := readTarget(t, c.target, testTopic, w.total(), time.Second, 60*time.Second)
	if res := audit(t, w, got, true, true); res.missing != 0 || res.duplicates != 0 {
		t.Fatalf("%d missing, %d duplicates after the target came back", res.missing, res.duplicates)
	}
	testutil.WaitFor(t, 90*time.Second, "ready", func() bool { return r.e.Ready() == nil })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestStopWhileWaitingForTargetTopicDuringOutage stops the engine while a partition
// waits for its target topic (it does not exist) and the target is unreachable. The
// producer's client retries a metadata refresh for deliveryTimeout; the wait must not
// hold the stop (or a rebalance) for that long.
func TestStopWhileWaitingForTargetTopicDuringOutage(t *testing.T) {
	const deliveryTimeout = 2 * time.Minute
	const drain = 2 * time.Second
	f := newFaultyNetwork()
	c := newClusters(t, 1, f.opt())
	w := newWorkload(1)
	w.produce(t, c.source, 10)
	cfg := c.testConfig(t, func(cfg *config.Config) {
		cfg.SyncTopics = config.BoolPtr(false)
		cfg.DeliveryTimeout = config.Duration{Duration: deliveryTimeout}
	})
	r := startEngine(t, cfg, testLogger(t), WithDrainTimeout(drain))
	testutil.WaitFor(t, 60*time.Second, "the partition waiting for its target topic", func() bool {
		s := r.e.Stats()
		return len(s.Partitions) == 1 && s.Partitions[0].WaitingForTarget
	})
	f.setCut(true)
	time.Sleep(2 * time.Second) // a refresh is now retrying against the cut target
	start := time.Now()
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > stopCeiling(drain) {
		t.Fatalf("the stop took %v, want it bounded by the drain %v (ceiling %v), not by deliveryTimeout %v", took, drain, stopCeiling(drain), deliveryTimeout)
	}
}
