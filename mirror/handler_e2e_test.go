package mirror_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/handler"
)

const (
	e2eTopic      = "orders"
	e2eAuditTopic = "orders.audit"
	e2eGroup      = "handler-e2e"
)

// auditCopy is a 1->2 handler as a team would register it in its own main: it emits
// the record unchanged and a copy, marked with a "copy" header, to orders.audit.
type auditCopy struct{}

func (auditCopy) Handle(_ context.Context, in *handler.Record, out []*handler.Record) ([]*handler.Record, error) {
	c := *in
	c.Topic = e2eAuditTopic
	c.Headers = append(append([]handler.Header(nil), in.Headers...), handler.Header{Key: "copy", Value: []byte("audit")})
	return append(out, in, &c), nil
}

func init() {
	handler.Register("e2e-audit-copy", func(args map[string]string) (handler.Handler, error) {
		if err := handler.CheckArgs(args, nil, nil); err != nil {
			return nil, err
		}
		return auditCopy{}, nil
	})
}

// TestHandlersEndToEnd mirrors 100k records through a CEL filter that drops every
// fourth record and a 1->2 fan-out: the target must hold exactly the kept records, once
// in each topic, in source order, and the committed offsets must reach the end of every
// source partition (filtered records count as done, fanned-out ones once both copies
// were acked).
func TestHandlersEndToEnd(t *testing.T) {
	start := time.Now()
	const partitions, perPartition = 4, 25_000
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, e2eTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	tgt, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, e2eTopic, e2eAuditTopic))
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()

	produceE2E(t, src, partitions, perPartition, 4)

	cfg := &config.Config{
		Source:        config.Cluster{BootstrapServers: src.ListenAddrs()},
		Target:        config.Cluster{BootstrapServers: tgt.ListenAddrs()},
		ConsumerGroup: e2eGroup,
		Topics:        config.Topics{Include: []string{e2eTopic}},
		Handlers: []config.HandlerSpec{
			{CEL: &config.CELHandler{Filter: "!('skip' in record.headers)"}},
			{Name: "e2e-audit-copy"},
		},
		OffsetCommitInterval: config.Duration{Duration: 300 * time.Millisecond},
		TopicSyncInterval:    config.Duration{Duration: time.Second},
		Metrics:              config.Metrics{Address: "0"},
	}
	cfg.Default()
	if err := mirror.ValidateConfig(cfg); err != nil {
		t.Fatal(err)
	}
	e, err := mirror.New(cfg, mirror.WithLogger(testr.NewWithOptions(t, testr.Options{Verbosity: 0})))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var runErr error
	stopped := make(chan struct{})
	go func() { runErr = e.Run(ctx); close(stopped) }()
	defer func() {
		cancel()
		select {
		case <-stopped:
		case <-time.After(30 * time.Second):
			t.Error("the engine did not stop within 30s")
		}
	}()

	const kept = perPartition * 3 / 4 // i%4 == 0 carries the skip header
	// Fails after 60 s without a new record, not after 60 s in all.
	got := readE2E(t, tgt, partitions*kept*2, 60*time.Second)
	for _, topic := range []string{e2eTopic, e2eAuditTopic} {
		for p := int32(0); p < partitions; p++ {
			recs := got[topic][p]
			if len(recs) != kept {
				t.Fatalf("%s/%d holds %d records, want %d", topic, p, len(recs), kept)
			}
			want := 0
			for _, r := range recs {
				if want%4 == 0 {
					want++
				}
				if id := header(r, "id"); id != fmt.Sprintf("%d/%d", p, want) {
					t.Fatalf("%s/%d offset %d holds record %s, want %d/%d (exactly the kept records, in order)", topic, p, r.Offset, id, p, want)
				}
				if string(r.Key) != fmt.Sprintf("k-%d-%d", p, want) || string(r.Value) != fmt.Sprintf("v-%d-%d", p, want) {
					t.Fatalf("%s/%d record %d: key %q value %q", topic, p, want, r.Key, r.Value)
				}
				if isAudit := header(r, "copy") == "audit"; isAudit != (topic == e2eAuditTopic) {
					t.Fatalf("%s/%d record %d: copy header %q", topic, p, want, header(r, "copy"))
				}
				want++
			}
		}
	}

	// Every source offset is committed, to the end of each partition.
	deadline := time.Now().Add(20 * time.Second)
	for {
		s := e.Stats()
		ok := len(s.Partitions) == partitions
		for _, ps := range s.Partitions {
			ok = ok && ps.Committed == perPartition
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("offsets not committed to the end within 20s: %+v", s.Partitions)
		}
		time.Sleep(100 * time.Millisecond)
	}
	cancel()
	<-stopped
	if runErr != nil {
		t.Fatalf("Run returned %v after a clean stop", runErr)
	}
	s := e.Stats()
	if s.Filtered != partitions*perPartition/4 || s.Skipped != 0 || s.InFlight != 0 {
		t.Fatalf("stats: filtered %d, skipped %d, in flight %d; want %d, 0, 0", s.Filtered, s.Skipped, s.InFlight, partitions*perPartition/4)
	}
	committed := testutil.CommittedOffsets(t, src.ListenAddrs(), e2eGroup, e2eTopic, partitions)
	for p := int32(0); p < partitions; p++ {
		if committed[p] != perPartition {
			t.Fatalf("the source group committed %d on partition %d, want %d", committed[p], p, perPartition)
		}
	}
	t.Logf("mirrored %d source records: %d filtered, %d kept, fanned out to %d target records, offsets committed to the end, in %v",
		partitions*perPartition, s.Filtered, partitions*kept, partitions*kept*2, time.Since(start).Round(time.Millisecond))
}

// produceE2E writes perPartition records to each source partition: record i of
// partition p has key k-p-i, value v-p-i, header id=p/i, and a "skip" header when
// skipEvery > 0 and i%skipEvery is 0.
func produceE2E(t testing.TB, cl *kfake.Cluster, partitions int32, perPartition, skipEvery int) {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(cl.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(100_000))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for i := 0; i < perPartition; i++ {
		for p := int32(0); p < partitions; p++ {
			r := &kgo.Record{
				Topic:     e2eTopic,
				Partition: p,
				Key:       []byte(fmt.Sprintf("k-%d-%d", p, i)),
				Value:     []byte(fmt.Sprintf("v-%d-%d", p, i)),
				Headers:   []kgo.RecordHeader{{Key: "id", Value: []byte(fmt.Sprintf("%d/%d", p, i))}},
			}
			if skipEvery > 0 && i%skipEvery == 0 {
				r.Headers = append(r.Headers, kgo.RecordHeader{Key: "skip", Value: []byte(strconv.Itoa(i))})
			}
			wg.Add(1)
			client.Produce(context.Background(), r, func(_ *kgo.Record, err error) {
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
		t.Fatalf("producing to the source: %v", firstErr)
	}
}

// readE2E reads both target topics until want records arrived and nothing more comes
// for a second (so extra records would be seen), or fails after timeout.
func readE2E(t *testing.T, cl *kfake.Cluster, want int, stall time.Duration) map[string]map[int32][]*kgo.Record {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(cl.ListenAddrs()...), kgo.ConsumeTopics(e2eTopic, e2eAuditTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	out := map[string]map[int32][]*kgo.Record{e2eTopic: {}, e2eAuditTopic: {}}
	n := 0
	// The bound is on progress, not on the whole copy: on a machine whose cores are
	// stolen for seconds the copy takes minutes yet never stops moving, while a stuck
	// engine delivers nothing new for the whole of stall. readE2ECeiling only keeps a
	// trickle from running forever.
	start, lastNew := time.Now(), time.Now()
	for time.Since(lastNew) < stall && time.Since(start) < readE2ECeiling {
		if n >= want && time.Since(lastNew) > time.Second {
			return out
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		fs := client.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Topic][r.Partition] = append(out[r.Topic][r.Partition], r)
			n++
			lastNew = time.Now()
		})
	}
	t.Fatalf("the target holds %d records after %v (the last new one %v ago), want %d",
		n, time.Since(start).Round(time.Second), time.Since(lastNew).Round(time.Second), want)
	return nil
}

// readE2ECeiling bounds readE2E however slowly records keep arriving.
const readE2ECeiling = 10 * time.Minute

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// BenchmarkMirrorThroughput measures end-to-end records per second through the engine
// on kfake without handlers, with the identity handler (the engine's handler path
// alone) and with a CEL filter that keeps every record. Every iteration runs all three,
// in rotating order, on 100k fresh records each, so that load from elsewhere on the
// machine hits them alike; the ratios are what the issue bounds (the filter may cost at
// most 15%). Run it with -benchtime 3x or more.
func BenchmarkMirrorThroughput(b *testing.B) {
	const partitions, perPartition = 4, 25_000
	variants := []struct {
		name     string
		handlers []config.HandlerSpec
	}{
		{name: "no-handler"},
		{name: "identity", handlers: []config.HandlerSpec{{Name: "identity"}}},
		{name: "cel-filter", handlers: []config.HandlerSpec{{CEL: &config.CELHandler{Filter: "!('skip' in record.headers)"}}}},
	}
	took := make([]time.Duration, len(variants))
	iteration := 0
	for b.Loop() {
		for k := range variants {
			v := (iteration + k) % len(variants)
			b.StopTimer()
			took[v] += mirrorOnce(b, partitions, perPartition, variants[v].handlers)
			b.StartTimer()
		}
		iteration++
	}
	rate := func(d time.Duration) float64 { return float64(iteration*partitions*perPartition) / d.Seconds() }
	for v := range variants {
		b.ReportMetric(rate(took[v]), variants[v].name+"-records/s")
	}
	b.ReportMetric(rate(took[2])/rate(took[0]), "cel-filter/no-handler")
	b.ReportMetric(rate(took[1])/rate(took[0]), "identity/no-handler")
}

// mirrorOnce mirrors partitions*perPartition fresh records through a new engine with
// the given handlers and returns the time from Run until the target acked them all.
func mirrorOnce(b *testing.B, partitions int32, perPartition int, handlers []config.HandlerSpec) time.Duration {
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, e2eTopic))
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	tgt, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, e2eTopic))
	if err != nil {
		b.Fatal(err)
	}
	defer tgt.Close()
	produceE2E(b, src, partitions, perPartition, 0)
	cfg := &config.Config{
		Source:               config.Cluster{BootstrapServers: src.ListenAddrs()},
		Target:               config.Cluster{BootstrapServers: tgt.ListenAddrs()},
		ConsumerGroup:        e2eGroup,
		Topics:               config.Topics{Include: []string{e2eTopic}},
		Handlers:             handlers,
		OffsetCommitInterval: config.Duration{Duration: 300 * time.Millisecond},
		Metrics:              config.Metrics{Address: "0"},
	}
	cfg.Default()
	e, err := mirror.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	began := time.Now()
	go func() { _ = e.Run(ctx); close(stopped) }()
	for e.Stats().Records < int64(partitions)*int64(perPartition) {
		time.Sleep(5 * time.Millisecond)
	}
	d := time.Since(began)
	cancel()
	<-stopped
	return d
}
