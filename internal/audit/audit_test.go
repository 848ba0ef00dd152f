package audit

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func newCluster(t *testing.T, topics map[string]int32) []string {
	t.Helper()
	var opts []kfake.Opt
	for topic, n := range topics {
		opts = append(opts, kfake.SeedTopics(n, topic))
	}
	c, err := kfake.NewCluster(append(opts, kfake.NumBrokers(1))...)
	if err != nil {
		t.Fatalf("starting kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// readSource returns every record of the source, in partition order.
func readSource(t *testing.T, ctx context.Context, brokers []string, topics map[string]int32, want int) []*kgo.Record {
	t.Helper()
	parts := map[string]map[int32]kgo.Offset{}
	for topic, n := range topics {
		parts[topic] = map[int32]kgo.Offset{}
		for p := int32(0); p < n; p++ {
			parts[topic][p] = kgo.NewOffset().AtStart()
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumePartitions(parts))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	for len(out) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d source records", len(out), want)
		}
		out = append(out, fs.Records()...)
	}
	return out
}

// TestAuditHandMadeCopy copies a workload by hand with one fault of each kind and checks
// that Audit counts each exactly once, in the right partition.
func TestAuditHandMadeCopy(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topics := map[string]int32{"orders": 3, "payments": 2}
	src := newCluster(t, topics)
	dst := newCluster(t, topics)

	w := Workload{Topics: topics, Records: 1000, NullFraction: 0.1, SkipFraction: 0.1, Seed: 7, ValueSize: 64}
	var lastProgress int
	p, err := Produce(ctx, src, w, func(n int) { lastProgress = n })
	if err != nil {
		t.Fatalf("Produce: %v", err)
	}
	if len(p.Records) != 1000 || p.Failed != 0 || lastProgress != 1000 {
		t.Fatalf("produced %d records, %d failed, progress %d; want 1000, 0, 1000", len(p.Records), p.Failed, lastProgress)
	}
	skips, nulls := 0, 0
	for _, r := range p.Records {
		if r.Skip {
			skips++
		}
		if r.Null {
			nulls++
		}
	}
	if skips < 50 || skips > 150 || nulls < 50 || nulls > 150 {
		t.Fatalf("skip %d and null %d records of 1000; want about 100 each", skips, nulls)
	}

	srcRecords := readSource(t, ctx, src, topics, 1000)
	// Pick the victims among the records the filter keeps, in orders/0 and payments/1.
	var kept []*kgo.Record
	var leak *kgo.Record
	for _, r := range srcRecords {
		if headerValue(r, HeaderSkip) != "" {
			if leak == nil && r.Topic == "payments" {
				leak = r
			}
			continue
		}
		kept = append(kept, r)
	}
	byPart := func(topic string, p int32) []*kgo.Record {
		var rs []*kgo.Record
		for _, r := range kept {
			if r.Topic == topic && r.Partition == p {
				rs = append(rs, r)
			}
		}
		return rs
	}
	o0 := byPart("orders", 0)
	p1 := byPart("payments", 1)
	o2 := byPart("orders", 2)
	drop := o0[10]
	dup := o0[20]
	swapA, swapB := o0[30], o0[31] // written B then A: A arrives late
	wrong := p1[5]
	alter := o2[7]
	var missingID string
	for _, h := range drop.Headers {
		if h.Key == HeaderID {
			missingID = string(h.Value)
		}
	}

	var out []*kgo.Record
	for _, r := range kept {
		switch r {
		case drop:
			continue
		case swapA:
			continue
		case swapB:
			out = append(out, copyRecord(r), copyRecord(swapA))
			continue
		}
		c := copyRecord(r)
		switch r {
		case dup:
			out = append(out, copyRecord(r))
		case wrong:
			c.Partition = 0
		case alter:
			c.Value = append([]byte("x"), c.Value...)
		}
		out = append(out, c)
	}
	out = append(out, copyRecord(leak))
	out = append(out,
		&kgo.Record{Topic: "orders", Partition: 1, Value: []byte("no id")},
		&kgo.Record{Topic: "orders", Partition: 1, Headers: []kgo.RecordHeader{{Key: HeaderID, Value: []byte("orders/1/foreign.0")}}},
	)
	writeTarget(t, ctx, dst, out)

	m, err := ReadAll(ctx, dst, p.Topics(), ReadOptions{})
	if err != nil {
		t.Fatalf("ReadAll: %v", err)
	}
	if len(m.Records) != len(out) {
		t.Fatalf("read %d target records, wrote %d", len(m.Records), len(out))
	}
	rep := Audit(p, m, Options{Filtered: SkipHeaderFiltered})
	t.Logf("\n%s", rep)

	wantTotal := PartitionReport{
		Topic: "total", Partition: -1,
		Produced: 1000, Filtered: skips, Mirrored: 1000 - skips - 1 + 1,
		Lost: 1, Duplicated: 1, OutOfOrder: 1, WrongPartition: 1, Altered: 1, Leaked: 1,
	}
	if rep.Total != wantTotal {
		t.Errorf("total\n got %+v\nwant %+v", rep.Total, wantTotal)
	}
	if rep.Unknown != 2 || rep.Aborted != 0 || rep.Target != len(out) {
		t.Errorf("unknown %d, aborted %d, target %d; want 2, 0, %d", rep.Unknown, rep.Aborted, rep.Target, len(out))
	}
	if len(rep.FirstMissing) != 1 || !strings.HasPrefix(rep.FirstMissing[0], missingID+"@") {
		t.Errorf("first missing %v; want [%s@...]", rep.FirstMissing, missingID)
	}
	if rep.OK() {
		t.Error("OK() = true for a copy with a lost record")
	}

	wantPart := map[string]func(PartitionReport) bool{
		"orders/0":   func(r PartitionReport) bool { return r.Lost == 1 && r.Duplicated == 1 && r.OutOfOrder == 1 },
		"orders/2":   func(r PartitionReport) bool { return r.Altered == 1 && r.Lost == 0 },
		"payments/1": func(r PartitionReport) bool { return r.WrongPartition == 1 && r.Lost == 0 },
	}
	for _, pr := range rep.Partitions {
		name := fmt.Sprintf("%s/%d", pr.Topic, pr.Partition)
		if check, ok := wantPart[name]; ok && !check(pr) {
			t.Errorf("partition %s: %+v", name, pr)
		}
	}

	// A faithful copy of the same workload passes.
	clean := Audit(p, &Mirrored{Records: faithful(p)}, Options{Filtered: SkipHeaderFiltered})
	if !clean.OK() || clean.Total.Lost != 0 || clean.Total.Mirrored != 1000-skips {
		t.Errorf("faithful copy: %s", clean.Summary())
	}
}

// faithful builds the target a perfect mirror would hold, without a cluster.
func faithful(p *Produced) []MirroredRecord {
	var out []MirroredRecord
	for _, r := range p.Records {
		if r.Skip {
			continue
		}
		out = append(out, MirroredRecord{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, ID: r.ID, Digest: r.Digest})
	}
	return out
}

func copyRecord(r *kgo.Record) *kgo.Record {
	return &kgo.Record{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp}
}

func writeTarget(t *testing.T, ctx context.Context, brokers []string, rs []*kgo.Record) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	// One at a time, so the target order is exactly the order written.
	for _, r := range rs {
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("writing the hand-made copy: %v", err)
		}
	}
}

// TestProduceTransactions writes committed and aborted transactions and checks that
// only committed records count as produced, and that a read_uncommitted reader sees
// the aborted ones as such.
func TestProduceTransactions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topics := map[string]int32{"txn": 2}
	src := newCluster(t, topics)
	p, err := Produce(ctx, src, Workload{Topics: topics, Records: 400, TransactionSize: 20, AbortFraction: 0.5, Seed: 3}, nil)
	if err != nil {
		t.Fatalf("Produce: %v", err)
	}
	if len(p.Records)+len(p.Aborted) != 400 || len(p.Aborted) == 0 || len(p.Records) == 0 {
		t.Fatalf("committed %d, aborted %d; want both > 0 summing to 400", len(p.Records), len(p.Aborted))
	}

	tests := map[string]struct {
		committed   bool
		wantAborted int
	}{
		"read committed":   {committed: true, wantAborted: 0},
		"read uncommitted": {committed: false, wantAborted: len(p.Aborted)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m, err := ReadAll(ctx, src, p.Topics(), ReadOptions{ReadCommitted: tc.committed})
			if err != nil {
				t.Fatalf("ReadAll: %v", err)
			}
			rep := Audit(p, m, Options{})
			if rep.Total.Lost != 0 || rep.Total.Mirrored != len(p.Records) || rep.Aborted != tc.wantAborted || rep.Unknown != 0 {
				t.Errorf("%s; want lost 0, mirrored %d, aborted %d", rep.Summary(), len(p.Records), tc.wantAborted)
			}
			if rep.OK() != (tc.wantAborted == 0) {
				t.Errorf("OK() = %v with %d aborted records on the target", rep.OK(), rep.Aborted)
			}
		})
	}
}

// TestReadUntilComplete checks that the reader picks up records that arrive after it
// started, across polls, and stops once nothing is missing.
func TestReadUntilComplete(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	topics := map[string]int32{"late": 4}
	src := newCluster(t, topics)
	dst := newCluster(t, topics)
	p, err := Produce(ctx, src, Workload{Topics: topics, Records: 200, Seed: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	rs := readSource(t, ctx, src, topics, 200)
	writeTarget(t, ctx, dst, copyAll(rs[:100]))
	go func() {
		time.Sleep(time.Second)
		cl, err := kgo.NewClient(kgo.SeedBrokers(dst...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			return
		}
		defer cl.Close()
		cl.ProduceSync(ctx, copyAll(rs[100:])...)
	}()
	m, rep, err := ReadUntilComplete(ctx, dst, p, Options{})
	if err != nil {
		t.Fatalf("ReadUntilComplete: %v\n%s", err, rep)
	}
	if !rep.OK() || rep.Total.Mirrored != 200 || len(m.Records) != 200 {
		t.Errorf("%s, read %d; want 200 mirrored", rep.Summary(), len(m.Records))
	}
}

func copyAll(rs []*kgo.Record) []*kgo.Record {
	out := make([]*kgo.Record, len(rs))
	for i, r := range rs {
		out[i] = copyRecord(r)
	}
	return out
}
