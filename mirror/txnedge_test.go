package mirror

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/offsets"
)

// The exactly-once path at its edges (issue 30): stops while a claim waits, a target
// that black-holes requests, stops during fencing, the out-of-range remedy, and the
// producers of claims that never started.

// TestExactlyOnceStopWhileWaitingForTargetKeepsProgress stops an exactly-once engine
// while the first record of each claim waits for its target topic (the target answers
// metadata for it with LEADER_NOT_AVAILABLE, as during a leader election). The
// transaction the stop commits holds no record, so it must not store an offset: the
// target-side offsets stay where the last transaction with records put them, and a
// read_committed reader sees every record once after a restart on a healed target.
func TestExactlyOnceStopWhileWaitingForTargetKeepsProgress(t *testing.T) {
	const (
		partitions = 2
		before     = 300
		during     = 50
	)
	c := newClusters(t, partitions)
	w := newWorkload(partitions)
	w.produce(t, c.source, before)
	cfg := c.exactlyOnceConfig(t)
	progress := func() map[int32]int64 { return targetProgress(t, c, cfg.ConsumerGroup, partitions) }

	first := startEngine(t, cfg, testLogger(t).WithName("first"))
	testutil.WaitFor(t, 60*time.Second, "the first records committed in transactions", func() bool {
		p := progress()
		return p[0] == before && p[1] == before
	})
	if err := first.stop(t); err != nil {
		t.Fatal(err)
	}

	// A leader election on the target: metadata of the mirrored topic answers
	// LEADER_NOT_AVAILABLE for every partition until healed.
	election := c.target.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Metadata}, Topic: testTopic, Err: kerr.LeaderNotAvailable, Count: -1})
	second := startEngine(t, cfg, testLogger(t).WithName("second"))
	testutil.WaitFor(t, 60*time.Second, "the second engine joined", func() bool { return second.e.Ready() == nil })
	w.produce(t, c.source, during)
	testutil.WaitFor(t, 60*time.Second, "both partitions waiting for their target topic", func() bool {
		s := second.e.Stats()
		waiting := 0
		for _, p := range s.Partitions {
			if p.WaitingForTarget {
				waiting++
			}
		}
		return waiting == partitions
	})
	if err := second.stop(t); err != nil {
		t.Fatal(err)
	}
	if p := progress(); p[0] != before || p[1] != before {
		t.Fatalf("target-side offsets after a stop while waiting for the target topic: %v, want %d on both partitions (no record was mirrored)", p, before)
	}

	election.Remove()
	third := startEngine(t, cfg, testLogger(t).WithName("third"))
	got := readTargetCommitted(t, c.target, testTopic, w.total(), 2*time.Second, 2*time.Minute)
	res := audit(t, w, got, true, true)
	if err := third.stop(t); err != nil {
		t.Fatal(err)
	}
	if res.missing != 0 || res.duplicates != 0 || res.records != w.total() {
		t.Fatalf("after a stop while waiting for the target topic: %d records read committed, %d missing, %d duplicates; want %d, 0, 0",
			res.records, res.missing, res.duplicates, w.total())
	}
	t.Logf("stop while waiting for the target topic: target-side offsets stayed at %d; %d records read committed, 0 lost, 0 duplicates",
		before, res.records)
}

// targetProgress reads the target-side offsets (ProgressGroup) of testTopic's
// partitions; none before the group's first commit.
func targetProgress(t *testing.T, c *testClusters, group string, partitions int32) map[int32]int64 {
	t.Helper()
	sc := sarama.NewConfig()
	sc.Version = sarama.V3_6_0_0
	admin, err := sarama.NewClusterAdmin(c.target.ListenAddrs(), sc)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	parts := make([]int32, partitions)
	for i := range parts {
		parts[i] = int32(i)
	}
	out := map[int32]int64{}
	resp, err := admin.ListConsumerGroupOffsets(ProgressGroup(group), map[string][]int32{testTopic: parts})
	if errors.Is(err, sarama.ErrGroupIDNotFound) {
		return out
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		if b := resp.GetBlock(testTopic, p); b != nil {
			out[p] = b.Offset
		}
	}
	return out
}

// TestExactlyOnceClosesProducersOfClaimsThatNeverStarted makes a claim that never
// starts: its committed offset fell out of the source's retention, so sarama cannot
// start its partition consumer and never calls ConsumeClaim. The transactional producer
// Setup opened for it (the fencing step) must be closed when the session ends, not kept
// until a later session of the same partition, which may never come.
func TestExactlyOnceClosesProducersOfClaimsThatNeverStarted(t *testing.T) {
	c := newClusters(t, 1)
	w := newWorkload(1)
	w.produce(t, c.source, 100)
	cfg := c.exactlyOnceConfig(t)
	first := startEngine(t, cfg, testLogger(t).WithName("first"))
	testutil.WaitFor(t, 60*time.Second, "100 records committed in transactions", func() bool {
		return targetProgress(t, c, cfg.ConsumerGroup, 1)[0] == 100
	})
	if err := first.stop(t); err != nil {
		t.Fatal(err)
	}
	w.produce(t, c.source, 100)
	if err := sourceAdmin(t, c).DeleteRecords(testTopic, map[int32]int64{0: 150}); err != nil {
		t.Fatal(err)
	}

	second := startEngine(t, cfg, testLogger(t).WithName("second"))
	if err := second.wait(t, 60*time.Second); err == nil {
		t.Fatal("Run returned nil although records 100..149 were deleted before they were mirrored")
	}
	opened := second.e.txn.open.Load()
	testutil.WaitFor(t, 30*time.Second, "every transactional producer closed", func() bool { return second.e.txn.open.Load() == 0 })
	t.Logf("%d transactional producers open when Run returned, 0 once closed in the background", opened)
}

// TestOutOfRangeRemedyWorksInEachMode deletes source records before they were
// mirrored (as retention would) and checks, in both delivery modes, that the engine
// stops with an error naming the remedy, and that applying that remedy (resetting the
// source group's offset for the partition to its first offset, as
// kafka-consumer-groups --reset-offsets --to-earliest does) lets the engine run: the
// records after the gap are mirrored once, the deleted ones are the only ones missing.
// With exactlyOnce the offset stored in the last target transaction used to win over
// the reset, and the engine stopped again with the same error.
func TestOutOfRangeRemedyWorksInEachMode(t *testing.T) {
	const (
		mirrored = 500
		deleted  = 300
		after    = 200
	)
	tests := map[string]struct {
		exactlyOnce bool
		remedy      []string
	}{
		"atLeastOnce": {remedy: []string{"reset the group's offset", "--group mirror-test --topic orders:0 --reset-offsets --to-earliest --execute"}},
		"exactlyOnce": {exactlyOnce: true, remedy: []string{"reset the group's offset", "--group mirror-test --topic orders:0 --reset-offsets --to-earliest --execute",
			"exactlyOnce", "last target transaction"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := newClusters(t, 1)
			w := newWorkload(1)
			w.produce(t, c.source, mirrored)
			cfg := c.testConfig(t)
			if tc.exactlyOnce {
				cfg = c.exactlyOnceConfig(t)
			}
			first := startEngine(t, cfg, testLogger(t).WithName("first"))
			testutil.WaitFor(t, 60*time.Second, "the first records mirrored and committed", func() bool {
				s := first.e.Stats()
				return len(s.Partitions) == 1 && s.Partitions[0].Committed == mirrored
			})
			if err := first.stop(t); err != nil {
				t.Fatal(err)
			}
			w.produce(t, c.source, deleted+after)
			if err := sourceAdmin(t, c).DeleteRecords(testTopic, map[int32]int64{0: mirrored + deleted}); err != nil {
				t.Fatal(err)
			}

			second := startEngine(t, cfg, testLogger(t).WithName("second"))
			err := second.wait(t, 60*time.Second)
			if err == nil {
				t.Fatalf("Run returned nil although records %d..%d were deleted before they were mirrored", mirrored, mirrored+deleted-1)
			}
			for _, want := range append([]string{"source partition orders/0", "out of range"}, tc.remedy...) {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("error %q does not contain %q", err, want)
				}
			}

			// The remedy, with the mirror stopped: the group's offset moves to the
			// partition's first offset.
			testutil.CommitOffsets(t, c.source.ListenAddrs(), cfg.ConsumerGroup, testTopic, map[int32]int64{0: mirrored + deleted}, "")
			third := startEngine(t, cfg, testLogger(t).WithName("third"))
			testutil.WaitFor(t, 60*time.Second, "the records after the gap mirrored and committed", func() bool {
				s := third.e.Stats()
				return third.e.isFailed() || len(s.Partitions) == 1 && s.Partitions[0].Committed == int64(w.total())
			})
			if err := third.stop(t); err != nil {
				t.Fatalf("Run after the remedy = %v, want nil", err)
			}
			got := readTargetAs(t, c.target, testTopic, mirrored+after, time.Second, time.Minute, tc.exactlyOnce)
			seen := map[int]int{}
			for _, r := range got[0] {
				_, i := recordID(t, r)
				seen[i]++
			}
			for i := 0; i < w.total(); i++ {
				want := 1
				if i >= mirrored && i < mirrored+deleted {
					want = 0
				}
				if tc.exactlyOnce && seen[i] != want || !tc.exactlyOnce && (want == 0) != (seen[i] == 0) {
					t.Fatalf("record %d is on the target %d times, want %d", i, seen[i], want)
				}
			}
			t.Logf("%s: the error named the remedy; after it %d records on the target, the %d deleted ones the only missing", name, len(got[0]), deleted)
		})
	}
}

// swallowInitProducerID makes cl read every InitProducerId request and never answer
// it (transactional ones only, or every one), as a target that hangs does. heal lets
// later requests through; swallowed counts the requests it kept.
func swallowInitProducerID(cl *kfake.Cluster, transactionalOnly bool) (heal func(), swallowed *atomic.Int64) {
	var healed atomic.Bool
	swallowed = new(atomic.Int64)
	cl.ControlKey(kmsg.InitProducerID.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if healed.Load() {
			cl.DropControl()
			return nil, nil, false
		}
		cl.KeepControl()
		if r, ok := req.(*kmsg.InitProducerIDRequest); ok && transactionalOnly && r.TransactionalID == nil {
			return nil, nil, false
		}
		swallowed.Add(1)
		return nil, nil, true
	})
	return func() { healed.Store(true) }, swallowed
}

// TestExactlyOnceStopDuringFencingIsBounded stops two exactly-once members while a
// rebalance has them both in Setup, fencing their new partitions' previous owners,
// and the target swallows every transactional InitProducerId. Each Run must return
// within the drain bound (3 x (drain + commit)), like the at-least-once path; it used
// to wait for sarama's read timeout and retries. After the target heals, a new member
// mirrors everything: a read_committed reader sees every record once.
func TestExactlyOnceStopDuringFencingIsBounded(t *testing.T) {
	const (
		partitions = 4
		drain      = 2 * time.Second
	)
	c := newClusters(t, partitions)
	w := newWorkload(partitions)
	w.produce(t, c.source, 200)
	cfg := c.exactlyOnceConfig(t, func(cfg *config.Config) { cfg.Streams = 1 })
	a := startEngine(t, cfg, testLogger(t).WithName("a"), WithDrainTimeout(drain))
	testutil.WaitFor(t, 60*time.Second, "the first records committed in transactions", func() bool {
		p := targetProgress(t, c, cfg.ConsumerGroup, partitions)
		return p[0] == 200 && p[1] == 200 && p[2] == 200 && p[3] == 200
	})

	heal, swallowed := swallowInitProducerID(c.target, true)
	b := startEngine(t, cfg, testLogger(t).WithName("b"), WithDrainTimeout(drain))
	w.produce(t, c.source, 100)
	// After the rebalance both members fence their partitions: one swallowed request
	// per partition.
	testutil.WaitFor(t, 60*time.Second, "both members fencing their partitions after the rebalance", func() bool {
		return swallowed.Load() >= partitions
	})

	ceiling := stopCeiling(drain)
	var took [2]time.Duration
	var wg sync.WaitGroup
	for i, r := range []*runningEngine{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			began := time.Now()
			r.cancel()
			select {
			case <-r.done:
				took[i] = time.Since(began)
			case <-time.After(60 * time.Second):
				took[i] = -1
			}
		}()
	}
	wg.Wait()
	for i, d := range took {
		if d < 0 || d > ceiling {
			t.Fatalf("member %d: Run returned %v after a stop during fencing (-1: not within 60 s), want at most %v (3 x (drain %v + commit %v))",
				i, d, ceiling, drain, commitAllowance)
		}
		if err := []*runningEngine{a, b}[i].err; err != nil {
			t.Fatalf("member %d: Run = %v after a stop during fencing, want nil", i, err)
		}
	}

	heal()
	last := startEngine(t, cfg, testLogger(t).WithName("last"), WithDrainTimeout(drain))
	got := readTargetCommitted(t, c.target, testTopic, w.total(), 2*time.Second, 2*time.Minute)
	res := audit(t, w, got, true, true)
	if err := last.stop(t); err != nil {
		t.Fatal(err)
	}
	if res.missing != 0 || res.duplicates != 0 || res.records != w.total() {
		t.Fatalf("after a stop during fencing: %d records read committed, %d missing, %d duplicates; want %d, 0, 0",
			res.records, res.missing, res.duplicates, w.total())
	}
	t.Logf("stop during fencing (%d InitProducerId swallowed): Run returned after %v and %v (ceiling %v); then %d records, 0 lost, 0 duplicates",
		swallowed.Load(), took[0].Round(time.Millisecond), took[1].Round(time.Millisecond), ceiling, res.records)
}

// TestExactlyOnceDeliveryTimeoutHolds black-holes the target's Produce requests under
// an exactly-once engine: its open transaction can neither be written nor committed.
// deliveryTimeout holds as it does at-least-once: the engine gives up no earlier than
// deliveryTimeout after the cut, Run returns an error naming the record, /readyz says
// so, nothing past the last committed transaction is stored; a restart on a healed
// target mirrors every record once. It used to run on (each produce retry waiting for
// sarama's 30 s read timeout: about an hour with the default deliveryTimeout).
func TestExactlyOnceDeliveryTimeoutHolds(t *testing.T) {
	const (
		deliveryTimeout = 5 * time.Second
		before          = 100
	)
	c := newClusters(t, 1)
	w := newWorkload(1)
	w.produce(t, c.source, before)
	cfg := c.exactlyOnceConfig(t, func(cfg *config.Config) { cfg.DeliveryTimeout = config.Duration{Duration: deliveryTimeout} })
	r := startEngine(t, cfg, testLogger(t).WithName("first"))
	testutil.WaitFor(t, 60*time.Second, "the first records committed in transactions", func() bool {
		return targetProgress(t, c, cfg.ConsumerGroup, 1)[0] == before
	})

	heal := blackHoleProduce(c.target)
	cut := time.Now()
	w.produce(t, c.source, 100)
	failedAtCh := make(chan time.Time, 1)
	go func() {
		<-r.e.failed
		failedAtCh <- time.Now()
	}()
	// The watch gives up one tick after deliveryTimeout, and the fatal stop waits at
	// most fatalDrainLimit: a generous ceiling of three times that.
	ceiling := 3 * (deliveryTimeout + time.Second + fatalDrainLimit + commitAllowance)
	err := r.wait(t, 2*ceiling)
	returned := time.Since(cut)
	var failedAt time.Time
	select {
	case failedAt = <-failedAtCh:
	case <-time.After(time.Second):
	}
	if err == nil || !strings.Contains(err.Error(), "deliveryTimeout") || !strings.Contains(err.Error(), "orders/0 offset 100") {
		t.Fatalf("Run = %v, want an error naming deliveryTimeout and the first record not committed (orders/0 offset 100)", err)
	}
	if gaveUp := failedAt.Sub(cut); failedAt.IsZero() || gaveUp < deliveryTimeout {
		t.Fatalf("the engine gave up %v after the cut, before deliveryTimeout %v: %v", gaveUp, deliveryTimeout, err)
	}
	if returned > ceiling {
		t.Fatalf("Run returned %v after the cut, want within %v", returned, ceiling)
	}
	if rerr := r.e.Ready(); rerr == nil || !strings.Contains(rerr.Error(), "deliveryTimeout") {
		t.Fatalf("Ready = %v after the failure, want the error", rerr)
	}
	if p := targetProgress(t, c, cfg.ConsumerGroup, 1)[0]; p != before {
		t.Fatalf("target-side offset %d after the failure, want %d: nothing past the last committed transaction", p, before)
	}
	if sg := testutil.CommittedOffsets(t, c.source.ListenAddrs(), cfg.ConsumerGroup, testTopic, 1)[0]; sg > before {
		t.Fatalf("source group offset %d after the failure, want at most %d", sg, before)
	}

	heal()
	second := startEngine(t, cfg, testLogger(t).WithName("second"))
	got := readTargetCommitted(t, c.target, testTopic, w.total(), 2*time.Second, 2*time.Minute)
	res := audit(t, w, got, true, true)
	if err := second.stop(t); err != nil {
		t.Fatal(err)
	}
	if res.missing != 0 || res.duplicates != 0 || res.records != w.total() {
		t.Fatalf("after the restart: %d records read committed, %d missing, %d duplicates; want %d, 0, 0",
			res.records, res.missing, res.duplicates, w.total())
	}
	t.Logf("black-holed target: gave up %v after the cut (deliveryTimeout %v), Run returned after %v: %v; restarted: %d records, 0 lost, 0 duplicates",
		failedAt.Sub(cut).Round(10*time.Millisecond), deliveryTimeout, returned.Round(10*time.Millisecond), err, res.records)
}

// TestExactlyOnceWaitForTargetTopicCommitsFirst routes records 50 and later of a
// partition (a CEL transform) to a target topic that does not exist yet: the partition
// waits for it. The transaction holding records 0..49 must be committed before the
// wait, not left open through it: read_committed readers see them meanwhile, and a
// wait longer than deliveryTimeout is no delivery failure (the delivery watch would
// otherwise count it). Once the topic exists, the rest follows, each record once.
func TestExactlyOnceWaitForTargetTopicCommitsFirst(t *testing.T) {
	const (
		deliveryTimeout = 2 * time.Second
		records         = 100
		first           = 50
		late            = "orders.late"
	)
	c := newClusters(t, 1, kfake.SeedTopics(1, testTopic))
	producePlain(t, c.source, testTopic, 1, records)
	cfg := c.exactlyOnceConfig(t, func(cfg *config.Config) {
		cfg.SyncTopics = config.BoolPtr(false)
		cfg.DeliveryTimeout = config.Duration{Duration: deliveryTimeout}
		cfg.Handlers = []config.HandlerSpec{{CEL: &config.CELHandler{Transform: &config.CELTransform{
			Topic: fmt.Sprintf("record.offset < %d ? record.topic : '%s'", first, late),
		}}}}
	})
	r := startEngine(t, cfg, testLogger(t))
	testutil.WaitFor(t, 60*time.Second, "the partition waiting for its target topic", func() bool {
		s := r.e.Stats()
		return len(s.Partitions) == 1 && s.Partitions[0].WaitingForTarget
	})
	got := readTargetCommitted(t, c.target, testTopic, first, time.Second, time.Minute)
	if n := len(got[0]); n != first {
		t.Fatalf("%s holds %d records read committed while the partition waits, want %d", testTopic, n, first)
	}
	// A wait longer than deliveryTimeout is not a delivery failure.
	time.Sleep(2 * deliveryTimeout)
	if r.e.isFailed() {
		t.Fatalf("the engine failed while a partition waited for its target topic: %v", r.e.failErr)
	}

	sc := sarama.NewConfig()
	sc.Version = sarama.V3_6_0_0
	admin, err := sarama.NewClusterAdmin(c.target.ListenAddrs(), sc)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.CreateTopic(late, &sarama.TopicDetail{NumPartitions: 1, ReplicationFactor: 1}, false); err != nil {
		t.Fatal(err)
	}
	rest := readTargetCommitted(t, c.target, late, records-first, time.Second, time.Minute)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	got = readTargetCommitted(t, c.target, testTopic, first, time.Second, time.Minute)
	if len(got[0]) != first || len(rest[0]) != records-first {
		t.Fatalf("read committed: %d records in %s and %d in %s, want %d and %d", len(got[0]), testTopic, len(rest[0]), late, first, records-first)
	}
	for i, rec := range append(got[0], rest[0]...) {
		if want := strconv.Itoa(i); string(rec.Value) != want {
			t.Fatalf("record %d holds %q, want %q (each record once, in order)", i, rec.Value, want)
		}
	}
	t.Logf("records 0..%d committed before the wait for %s (%v, longer than deliveryTimeout %v); then the other %d, each once",
		first-1, late, 2*deliveryTimeout, deliveryTimeout, records-first)
}

// TestDeliveryWatchDoesNotCountAStoppedProcess: a process stopped (SIGSTOP, a frozen
// VM) for longer than deliveryTimeout with a record in flight must not fail on its own
// watch the moment it runs again: it could read no ack meanwhile, and a zombie resumed
// after its partitions moved must go on long enough to learn it was fenced. A record
// still not acked deliveryTimeout after the process runs again is reported.
func TestDeliveryWatchDoesNotCountAStoppedProcess(t *testing.T) {
	const (
		timeout = 10 * time.Second
		tick    = time.Second
	)
	e := &Engine{
		log:   logr.Discard(),
		cfg:   &config.Config{Target: config.Cluster{BootstrapServers: []string{"target:9092"}}},
		parts: partitionRegistry{parts: map[partitionKey]*partitionState{}, m: newMetrics()},
	}
	p := e.parts.get(testTopic, 0)
	tr := offsets.New(16)
	tr.Add(41, 1)
	p.mu.Lock()
	p.tracker, p.assigned = tr, true
	p.mu.Unlock()

	stalls := map[*offsets.Tracker]*stall{}
	t0 := time.Now()
	if err := e.deliveryTick(stalls, t0.Add(-tick), t0, tick, timeout); err != nil {
		t.Fatalf("first look: %v", err)
	}
	// Stopped for a minute: the next tick comes late.
	resumed := t0.Add(time.Minute)
	if err := e.deliveryTick(stalls, t0, resumed, tick, timeout); err != nil {
		t.Fatalf("first look after a minute stopped: %v, want nil (the stopped time is not counted)", err)
	}
	// Running again, ticking on time: reported deliveryTimeout after it resumed.
	last, failedAt := resumed, time.Time{}
	for now := resumed.Add(tick); now.Before(resumed.Add(3 * timeout)); now = now.Add(tick) {
		if err := e.deliveryTick(stalls, last, now, tick, timeout); err != nil {
			if !strings.Contains(err.Error(), "offset 41") {
				t.Fatalf("error %q does not name offset 41", err)
			}
			failedAt = now
			break
		}
		last = now
	}
	if ran := failedAt.Sub(resumed); failedAt.IsZero() || ran < timeout-tick || ran > timeout+tick {
		t.Fatalf("reported %v after the process ran again, want deliveryTimeout %v (one tick either way)", ran, timeout)
	}
	// A tick late by less than watchStopSlack is a busy machine: counted.
	if d := stoppedFor(t0, t0.Add(tick+watchStopSlack), tick); d != 0 {
		t.Fatalf("stoppedFor a tick %v late = %v, want 0", watchStopSlack, d)
	}
}
