package mirror

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

const testTopic = "orders"

// testClusters is a source and a target kfake cluster, reached over TCP.
type testClusters struct {
	source, target *kfake.Cluster
}

func newClusters(t testing.TB, sourcePartitions int32, targetOpts ...kfake.Opt) *testClusters {
	t.Helper()
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(sourcePartitions, testTopic))
	if err != nil {
		t.Fatal(err)
	}
	tgt, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, targetOpts...)...)
	if err != nil {
		src.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { src.Close(); tgt.Close() })
	return &testClusters{source: src, target: tgt}
}

// testConfig is a defaulted, validated config mirroring testTopic, with short
// intervals so a test takes seconds.
func (c *testClusters) testConfig(t testing.TB, mutate ...func(*config.Config)) *config.Config {
	t.Helper()
	cfg := &config.Config{
		Source:               config.Cluster{BootstrapServers: c.source.ListenAddrs()},
		Target:               config.Cluster{BootstrapServers: c.target.ListenAddrs()},
		ConsumerGroup:        "mirror-test",
		Topics:               config.Topics{Include: []string{testTopic}},
		Streams:              2,
		OffsetCommitInterval: config.Duration{Duration: 300 * time.Millisecond},
		TopicSyncInterval:    config.Duration{Duration: time.Second},
		DeliveryTimeout:      config.Duration{Duration: 10 * time.Second},
		Metrics:              config.Metrics{Address: "0"},
	}
	if n := testMaxInFlightRequests(t); n > 0 {
		cfg.Producer = &config.Producer{MaxInFlightRequests: n}
	}
	for _, m := range mutate {
		m(cfg)
	}
	cfg.Default()
	if err := ValidateConfig(cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// testMaxInFlightRequests reads KAFKA_MIRROR_TEST_MAX_IN_FLIGHT: set (1..5), every
// engine test's config sets producer.maxInFlightRequests to it. The default (5) runs
// the audited tests through the pipelined producer (mirror/pipeline); 1 runs them
// through sarama's idempotent producers, e.g.
// KAFKA_MIRROR_TEST_MAX_IN_FLIGHT=1 go test ./mirror/ -run 'TestX'. 0 when unset.
func testMaxInFlightRequests(t testing.TB) int {
	v := os.Getenv("KAFKA_MIRROR_TEST_MAX_IN_FLIGHT")
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > config.MaxMaxInFlightRequests {
		t.Fatalf("KAFKA_MIRROR_TEST_MAX_IN_FLIGHT=%q: want 1 to %d", v, config.MaxMaxInFlightRequests)
	}
	return n
}

// fastGroup shortens sarama's group timings so that joins and rebalances take a
// fraction of a second against kfake.
func fastGroup(sc *sarama.Config) {
	sc.Consumer.Group.Heartbeat.Interval = 200 * time.Millisecond
	sc.Consumer.Group.Session.Timeout = 6 * time.Second
	sc.Consumer.Group.Rebalance.Timeout = 20 * time.Second
	sc.Consumer.Group.Rebalance.Retry.Backoff = 200 * time.Millisecond
	sc.Consumer.MaxWaitTime = 100 * time.Millisecond
}

// testDrainTimeout is the drain limit of engines started by startEngine unless a test
// sets its own with WithDrainTimeout (the ceilings of stop allow the longer of both).
const testDrainTimeout = 10 * time.Second

// commitAllowance is what a stop may spend after its drain: the final commit and
// leaving the group, against kfake on a busy machine.
const commitAllowance = 2 * time.Second

// stopCeiling is the longest a stop may take when its drain gives up after drain. It is
// a generous ceiling (three times what the engine is configured to allow), so that a
// shared, busy machine never fails it, while a stop that ignores the drain (waiting for
// a timeout of 30 s or more) still does. It is never a measurement of today's speed.
func stopCeiling(drain time.Duration) time.Duration { return 3 * (drain + commitAllowance) }

// runningEngine is an engine running in the background of a test.
type runningEngine struct {
	e      *Engine
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

func startEngine(t *testing.T, cfg *config.Config, log logr.Logger, opts ...Option) *runningEngine {
	t.Helper()
	opts = append([]Option{WithLogger(log), WithDrainTimeout(testDrainTimeout), func(o *options) { o.tuneSarama = fastGroup }}, opts...)
	e, err := New(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningEngine{e: e, cancel: cancel, done: make(chan struct{})}
	go func() { r.err = e.Run(ctx); close(r.done) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-r.done:
		case <-time.After(stopCeiling(testDrainTimeout)):
			t.Errorf("engine did not stop within %v", stopCeiling(testDrainTimeout))
		}
	})
	return r
}

// stop cancels the engine (a clean stop, like SIGTERM) and returns Run's error.
func (r *runningEngine) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case <-r.done:
		return r.err
	case <-time.After(stopCeiling(testDrainTimeout)):
		t.Fatalf("engine did not stop within %v", stopCeiling(testDrainTimeout))
		return nil
	}
}

// wait returns Run's error once it returns by itself.
func (r *runningEngine) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case <-r.done:
		return r.err
	case <-time.After(d):
		t.Fatalf("engine still running after %v", d)
		return nil
	}
}

// workload writes records to the source: per partition, record i has key "k<p>-<i>"
// (null every 10th), value "v<p>-<i>" (null every 7th: a tombstone), headers "id" and
// a second header, and timestamp base + i ms. The header "id" identifies the record on
// the target.
type workload struct {
	partitions int32
	base       time.Time
	next       []int // next index per partition
	// valueBytes, when set, pads every non-null value to that many bytes.
	valueBytes int
	// topic, when set, is the topic written to in place of testTopic.
	topic string
}

func newWorkload(partitions int32) *workload {
	return &workload{partitions: partitions, base: time.UnixMilli(1_700_000_000_000), next: make([]int, partitions)}
}

func (w *workload) record(p int32, i int) *kgo.Record {
	topic := testTopic
	if w.topic != "" {
		topic = w.topic
	}
	r := &kgo.Record{
		Topic:     topic,
		Partition: p,
		Timestamp: w.base.Add(time.Duration(i) * time.Millisecond),
		Headers: []kgo.RecordHeader{
			{Key: "id", Value: []byte(fmt.Sprintf("%d/%d", p, i))},
			{Key: "trace", Value: []byte{byte(i), 0, byte(p)}},
		},
	}
	if i%10 != 0 {
		r.Key = []byte(fmt.Sprintf("k%d-%d", p, i))
	}
	if i%7 != 0 {
		r.Value = []byte(fmt.Sprintf("v%d-%d-%s", p, i, "payload-payload-payload"))
		if w.valueBytes > len(r.Value) {
			r.Value = append(r.Value, bytes.Repeat([]byte{'x'}, w.valueBytes-len(r.Value))...)
		}
	}
	return r
}

// produce writes perPartition more records to every partition and waits for the acks.
func (w *workload) produce(t testing.TB, cl *kfake.Cluster, perPartition int) {
	t.Helper()
	if err := w.tryProduce(cl, perPartition); err != nil {
		t.Fatal(err)
	}
}

// tryProduce is produce for goroutines other than the test's.
func (w *workload) tryProduce(cl *kfake.Cluster, perPartition int) error {
	client, err := kgo.NewClient(kgo.SeedBrokers(cl.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(100000))
	if err != nil {
		return err
	}
	defer client.Close()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for i := 0; i < perPartition; i++ {
		for p := int32(0); p < w.partitions; p++ {
			wg.Add(1)
			client.Produce(context.Background(), w.record(p, w.next[p]+i), func(_ *kgo.Record, err error) {
				if err != nil {
					mu.Lock()
					firstErr = err
					mu.Unlock()
				}
				wg.Done()
			})
		}
	}
	wg.Wait()
	if firstErr != nil {
		return fmt.Errorf("producing the workload: %w", firstErr)
	}
	for p := range w.next {
		w.next[p] += perPartition
	}
	return nil
}

// produceTo writes the next n records of partition p only.
func (w *workload) produceTo(t testing.TB, cl *kfake.Cluster, p int32, n int) {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(cl.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	recs := make([]*kgo.Record, 0, n)
	for i := range n {
		recs = append(recs, w.record(p, w.next[p]+i))
	}
	if err := client.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatalf("producing %d records to partition %d: %v", n, p, err)
	}
	w.next[p] += n
}

// background keeps producing chunks of perPartition records per partition until the
// returned stop function is called; stop waits for the last chunk and reports errors.
func (w *workload) background(t *testing.T, cl *kfake.Cluster, perPartition int, pause time.Duration) (stop func()) {
	t.Helper()
	quit := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for {
			select {
			case <-quit:
				done <- nil
				return
			default:
			}
			if err := w.tryProduce(cl, perPartition); err != nil {
				done <- err
				return
			}
			time.Sleep(pause)
		}
	}()
	return func() {
		close(quit)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func (w *workload) total() int {
	n := 0
	for _, c := range w.next {
		n += c
	}
	return n
}

// targetContent is what the target holds: per partition, the records in order.
type targetContent map[int32][]*kgo.Record

// readTarget reads topic from the target until it holds at least want records, has
// read every record the topic held when the call began (so a busy machine's slow first
// fetch cannot pass for an empty topic), and then nothing more arrives for quiet; or it
// fails after timeout.
func readTarget(t *testing.T, cl *kfake.Cluster, topic string, want int, quiet, timeout time.Duration) targetContent {
	t.Helper()
	return readTargetAs(t, cl, topic, want, quiet, timeout, false)
}

// readTargetCommitted is readTarget as a read_committed consumer: records of aborted
// or still open transactions are not seen. It does not wait to reach the high
// watermark, which counts transaction markers and open transactions.
func readTargetCommitted(t *testing.T, cl *kfake.Cluster, topic string, want int, quiet, timeout time.Duration) targetContent {
	t.Helper()
	return readTargetAs(t, cl, topic, want, quiet, timeout, true)
}

func readTargetAs(t *testing.T, cl *kfake.Cluster, topic string, want int, quiet, timeout time.Duration, committed bool) targetContent {
	t.Helper()
	ends := topicEndOffsets(t, cl, topic)
	isolation := kgo.ReadUncommitted()
	if committed {
		ends, isolation = nil, kgo.ReadCommitted()
	}
	client, err := kgo.NewClient(kgo.SeedBrokers(cl.ListenAddrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond),
		kgo.FetchIsolationLevel(isolation),
		// New partitions (expansion) must be seen within the test.
		kgo.MetadataMaxAge(500*time.Millisecond), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	out := targetContent{}
	n := 0
	deadline := time.Now().Add(timeout)
	lastNew := time.Now()
	readAll := func() bool {
		for p, end := range ends {
			if rs := out[p]; end > 0 && (len(rs) == 0 || rs[len(rs)-1].Offset+1 < end) {
				return false
			}
		}
		return true
	}
	for time.Now().Before(deadline) {
		if n >= want && time.Since(lastNew) > quiet && readAll() {
			return out
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		fs := client.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Partition] = append(out[r.Partition], r)
			n++
			lastNew = time.Now()
		})
	}
	t.Fatalf("target topic %q holds %d records after %v, want %d", topic, n, timeout, want)
	return nil
}

// topicEndOffsets returns each partition's end offset (high watermark) of topic on cl, or
// none when the topic does not exist yet.
func topicEndOffsets(t *testing.T, cl *kfake.Cluster, topic string) map[int32]int64 {
	t.Helper()
	sc := sarama.NewConfig()
	sc.Version = sarama.V3_6_0_0
	sc.Metadata.AllowAutoTopicCreation = false
	client, err := sarama.NewClient(cl.ListenAddrs(), sc)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	parts, err := client.Partitions(topic)
	if errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
		return nil
	}
	if err != nil {
		t.Fatalf("while reading partitions of %q: %v", topic, err)
	}
	ends := map[int32]int64{}
	for _, p := range parts {
		if ends[p], err = client.GetOffset(topic, p, sarama.OffsetNewest); err != nil {
			t.Fatalf("while reading the end offset of %s/%d: %v", topic, p, err)
		}
	}
	return ends
}

// recordID parses the "id" header into partition and index.
func recordID(t *testing.T, r *kgo.Record) (int32, int) {
	t.Helper()
	for _, h := range r.Headers {
		if h.Key == "id" {
			var p, i int
			if _, err := fmt.Sscanf(string(h.Value), "%d/%d", &p, &i); err != nil {
				t.Fatalf("bad id header %q", h.Value)
			}
			return int32(p), i
		}
	}
	t.Fatalf("record at %d/%d has no id header", r.Partition, r.Offset)
	return 0, 0
}

// audit compares the target with the workload: every record present in its source
// partition, in order, and counts duplicates (a record seen more than once).
type auditResult struct {
	records, missing, duplicates int
	dupsPerPartition             map[int32]int
}

// With ordered, a record arriving for the first time after a later one fails the test.
func audit(t *testing.T, w *workload, got targetContent, checkContent, ordered bool) auditResult {
	t.Helper()
	res := auditResult{dupsPerPartition: map[int32]int{}}
	for p := int32(0); p < w.partitions; p++ {
		seen := make([]int, w.next[p])
		last := -1
		for _, r := range got[p] {
			res.records++
			sp, i := recordID(t, r)
			if sp != p {
				t.Fatalf("record %d/%d landed in target partition %d", sp, i, p)
			}
			if i >= len(seen) {
				t.Fatalf("record %d/%d was never produced", sp, i)
			}
			seen[i]++
			if seen[i] > 1 {
				res.duplicates++
				res.dupsPerPartition[p]++
			} else if ordered && i < last {
				t.Fatalf("partition %d: record %d arrived after %d for the first time (order broken)", p, i, last)
			}
			last = max(last, i)
			if checkContent {
				checkRecord(t, w.record(p, i), r)
			}
		}
		for i, n := range seen {
			if n == 0 {
				res.missing++
				if res.missing < 5 {
					t.Errorf("record %d/%d is missing on the target", p, i)
				}
			}
		}
	}
	return res
}

func checkRecord(t *testing.T, want, got *kgo.Record) {
	t.Helper()
	id := string(want.Headers[0].Value)
	if (want.Key == nil) != (got.Key == nil) || string(want.Key) != string(got.Key) {
		t.Fatalf("record %s: key %q (nil=%v), want %q (nil=%v)", id, got.Key, got.Key == nil, want.Key, want.Key == nil)
	}
	if (want.Value == nil) != (got.Value == nil) || string(want.Value) != string(got.Value) {
		t.Fatalf("record %s: value %q (nil=%v), want %q (nil=%v)", id, got.Value, got.Value == nil, want.Value, want.Value == nil)
	}
	if !got.Timestamp.Equal(want.Timestamp) {
		t.Fatalf("record %s: timestamp %v, want %v", id, got.Timestamp, want.Timestamp)
	}
	if !slices.EqualFunc(want.Headers, got.Headers, func(a, b kgo.RecordHeader) bool {
		return a.Key == b.Key && string(a.Value) == string(b.Value)
	}) {
		t.Fatalf("record %s: headers %v, want %v", id, got.Headers, want.Headers)
	}
}

func testLogger(t *testing.T) logr.Logger {
	return testr.NewWithOptions(t, testr.Options{Verbosity: 0})
}

var sarameTopicDetail2 = sarama.TopicDetail{NumPartitions: 2, ReplicationFactor: 1}

func sourceAdmin(t *testing.T, c *testClusters) sarama.ClusterAdmin {
	t.Helper()
	return clusterAdmin(t, c.source)
}

// clusterAdmin returns an admin of cl, closed when the test ends.
func clusterAdmin(t *testing.T, cl *kfake.Cluster) sarama.ClusterAdmin {
	t.Helper()
	sc := sarama.NewConfig()
	sc.Version = sarama.V3_6_0_0
	admin, err := sarama.NewClusterAdmin(cl.ListenAddrs(), sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	return admin
}

// producePlain writes perPartition small records to every partition of topic.
func producePlain(t *testing.T, cl *kfake.Cluster, topic string, partitions int32, perPartition int) {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(cl.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var recs []*kgo.Record
	for p := int32(0); p < partitions; p++ {
		for i := 0; i < perPartition; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte(strconv.Itoa(i))})
		}
	}
	if err := client.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// produceWithSkip writes n records to partition 0 of testTopic; every 4th has a "skip"
// header.
func produceWithSkip(t *testing.T, cl *kfake.Cluster, n int) {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(cl.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: testTopic, Value: []byte(strconv.Itoa(i))}
		if i%4 == 0 {
			recs[i].Headers = []kgo.RecordHeader{{Key: "skip", Value: []byte("1")}}
		}
	}
	if err := client.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

func contextWithCancel() (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}
