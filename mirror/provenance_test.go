package mirror

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

const testProvenanceHeader = config.DefaultProvenanceHeader

func TestProvenanceCheck(t *testing.T) {
	h := func(k, v string) *sarama.RecordHeader { return &sarama.RecordHeader{Key: []byte(k), Value: []byte(v)} }
	pv := &provenance{header: []byte(testProvenanceHeader), name: testProvenanceHeader, maxHops: 3,
		sourceID: []byte("A"), targetID: []byte("B")}
	tests := map[string]struct {
		headers []*sarama.RecordHeader
		strip   bool
		stamp   string
		why     dropReason
	}{
		"local record":                  {headers: []*sarama.RecordHeader{h("id", "1")}, stamp: "A"},
		"no headers":                    {stamp: "A"},
		"one hop":                       {headers: []*sarama.RecordHeader{h(testProvenanceHeader, "C")}, stamp: "C,A"},
		"two hops":                      {headers: []*sarama.RecordHeader{h(testProvenanceHeader, "C,D")}, stamp: "C,D,A"},
		"came from the target":          {headers: []*sarama.RecordHeader{h(testProvenanceHeader, "B")}, why: dropFromTarget},
		"went through the target":       {headers: []*sarama.RecordHeader{h(testProvenanceHeader, "C,B,D")}, why: dropFromTarget},
		"target in a second header":     {headers: []*sarama.RecordHeader{h(testProvenanceHeader, "C"), h(testProvenanceHeader, "B")}, why: dropFromTarget},
		"a prefix of the target id":     {headers: []*sarama.RecordHeader{h(testProvenanceHeader, "BB")}, stamp: "BB,A"},
		"at the hop limit":              {headers: []*sarama.RecordHeader{h(testProvenanceHeader, "C,D,E")}, why: dropMaxHops},
		"longest path counts the hops":  {headers: []*sarama.RecordHeader{h(testProvenanceHeader, "C,D,E"), h(testProvenanceHeader, "C")}, why: dropMaxHops},
		"empty header is no provenance": {headers: []*sarama.RecordHeader{h(testProvenanceHeader, "")}, stamp: "A"},
		"other header names the target": {headers: []*sarama.RecordHeader{h("origin", "B")}, stamp: "A"},
		"strip writes nothing":          {headers: []*sarama.RecordHeader{h(testProvenanceHeader, "C")}, strip: true},
		"strip still drops":             {headers: []*sarama.RecordHeader{h(testProvenanceHeader, "B")}, strip: true, why: dropFromTarget},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := *pv
			p.strip = tc.strip
			stamp, why := p.check(tc.headers)
			if why != tc.why || string(stamp) != tc.stamp {
				t.Fatalf("check = (%q, %d), want (%q, %d)", stamp, why, tc.stamp, tc.why)
			}
		})
	}
	local := []*sarama.RecordHeader{h("id", "1")}
	if n := testing.AllocsPerRun(100, func() { pv.check(local) }); n != 0 {
		t.Fatalf("check of a local record allocated %v times, want 0", n)
	}
}

// The cluster ids of the active-active tests' two kfake clusters.
const (
	clusterA = "dc-a"
	clusterB = "dc-b"
)

// newActiveActiveClusters is newClusters for active-active tests: both clusters hold
// testTopic with the same partitions and report the ids clusterA (source) and clusterB.
func newActiveActiveClusters(t *testing.T, partitions int32) *testClusters {
	t.Helper()
	c := &testClusters{}
	for _, cl := range []struct {
		to **kfake.Cluster
		id string
	}{{&c.source, clusterA}, {&c.target, clusterB}} {
		k, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, testTopic), kfake.ClusterID(cl.id))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(k.Close)
		*cl.to = k
	}
	return c
}

// withProvenance turns loop prevention on with its defaults and names the group.
func withProvenance(group string, mutate func(*config.Provenance)) func(*config.Config) {
	return func(cfg *config.Config) {
		cfg.ConsumerGroup = group
		cfg.Provenance = &config.Provenance{Enabled: true}
		if mutate != nil {
			mutate(cfg.Provenance)
		}
	}
}

// reversed mirrors from the test's target to its source.
func reversed(cfg *config.Config) { cfg.Source, cfg.Target = cfg.Target, cfg.Source }

// headerValue returns the value of r's header key and whether it has one.
func headerValue(r *kgo.Record, key string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value), true
		}
	}
	return "", false
}

// splitByProvenance separates the records a cluster holds into those produced on it
// (no provenance header) and those mirrored into it, whose provenance header must be
// exactly from (one hop, from the other cluster); the mirrored copies are returned
// without the header, so that audit can compare them with the workload.
func splitByProvenance(t *testing.T, got targetContent, from string) (local, mirrored targetContent) {
	t.Helper()
	local, mirrored = targetContent{}, targetContent{}
	for p, recs := range got {
		for _, r := range recs {
			v, ok := headerValue(r, testProvenanceHeader)
			if !ok {
				local[p] = append(local[p], r)
				continue
			}
			if v != from {
				id, _ := headerValue(r, "id")
				t.Fatalf("record %s at %d/%d has provenance %q, want %q (one hop: it looped)", id, p, r.Offset, v, from)
			}
			c := *r
			c.Headers = slices.DeleteFunc(slices.Clone(r.Headers), func(h kgo.RecordHeader) bool { return h.Key == testProvenanceHeader })
			mirrored[p] = append(mirrored[p], &c)
		}
	}
	return local, mirrored
}

// TestActiveActiveIdenticalNames runs both mirrors of an active-active pair, A->B and
// B->A with the same topic name and loop prevention on, while producers write to both
// clusters. Each cluster must end up holding its own records once and the other's once,
// in order and unchanged but for the provenance header (audit by id); no record may come
// back to where it was produced; each mirror drops exactly the other side's copies of
// its own records; and both mirrors' lag settles at 0 with their commits at the end of
// every partition (dropped records are committed like filtered ones).
func TestActiveActiveIdenticalNames(t *testing.T) { activeActive(t, false) }

// TestActiveActiveExactlyOnce is TestActiveActiveIdenticalNames with delivery
// exactlyOnce, counted by read_committed readers: the transactional path stamps and
// drops like the at-least-once one, and a dropped record's offset is committed inside
// its transaction.
func TestActiveActiveExactlyOnce(t *testing.T) { activeActive(t, true) }

func activeActive(t *testing.T, exactlyOnce bool) {
	const (
		partitions = 2
		initial    = 100 // records per partition on each side before the mirrors start
	)
	c := newActiveActiveClusters(t, partitions)
	wa, wb := newWorkload(partitions), newWorkload(partitions)
	wa.produce(t, c.source, initial)
	wb.produce(t, c.target, initial)

	configFor := c.testConfig
	read := readTarget
	if exactlyOnce {
		configFor, read = c.exactlyOnceConfig, readTargetCommitted
	}
	ab := startEngine(t, configFor(t, withProvenance("a-to-b", nil)), testLogger(t))
	ba := startEngine(t, configFor(t, withProvenance("b-to-a", nil), reversed), testLogger(t))
	stopA := wa.background(t, c.source, 10, 20*time.Millisecond)
	stopB := wb.background(t, c.target, 10, 20*time.Millisecond)
	// Both sides are written while both mirrors run: each must mirror the records
	// written meanwhile too, not only the backlog.
	testutil.WaitFor(t, 60*time.Second, "both mirrors past their backlog while both sides are written", func() bool {
		return ab.e.Stats().Records > 2*partitions*initial && ba.e.Stats().Records > 2*partitions*initial
	})
	stopA()
	stopB()

	total := wa.total() + wb.total()
	for _, side := range []struct {
		name      string
		cl        *kfake.Cluster
		own, peer *workload
		peerID    string
	}{
		{"A", c.source, wa, wb, clusterB},
		{"B", c.target, wb, wa, clusterA},
	} {
		got := read(t, side.cl, testTopic, total, time.Second, 60*time.Second)
		local, mirrored := splitByProvenance(t, got, side.peerID)
		own := audit(t, side.own, local, true, true)
		peer := audit(t, side.peer, mirrored, true, true)
		if own.records != side.own.total() || own.missing != 0 || own.duplicates != 0 ||
			peer.records != side.peer.total() || peer.missing != 0 || peer.duplicates != 0 {
			t.Fatalf("cluster %s: own records %d (%d lost, %d duplicates), mirrored from its peer %d (%d lost, %d duplicates); want %d and %d, each exactly once",
				side.name, own.records, own.missing, own.duplicates, peer.records, peer.missing, peer.duplicates, side.own.total(), side.peer.total())
		}
		t.Logf("cluster %s holds %d records: its own %d once each, its peer's %d once each, none looped", side.name, own.records+peer.records, own.records, peer.records)
	}

	for _, m := range []struct {
		name      string
		r         *runningEngine
		source    *kfake.Cluster
		own, peer *workload
	}{
		{"A->B", ab, c.source, wa, wb},
		{"B->A", ba, c.target, wb, wa},
	} {
		ends := topicEndOffsets(t, m.source, testTopic)
		testutil.WaitFor(t, 30*time.Second, m.name+": lag 0 and commits at every partition's end", func() bool {
			s := m.r.e.Stats()
			if len(s.Partitions) != partitions || s.Lag != 0 {
				return false
			}
			for _, ps := range s.Partitions {
				if ps.Committed != ends[ps.Partition] {
					return false
				}
			}
			return true
		})
		s := m.r.e.Stats()
		if s.Records != int64(m.own.total()) || s.LoopDropped != int64(m.peer.total()) {
			t.Fatalf("%s mirrored %d records and dropped %d as looping; want its side's %d and the peer's %d", m.name, s.Records, s.LoopDropped, m.own.total(), m.peer.total())
		}
		t.Logf("%s: mirrored %d, dropped %d looping copies, lag 0, committed %v", m.name, s.Records, s.LoopDropped, ends)
	}
}

// provenanceInput is one source record of TestProvenanceHopsAndStrip: its name (the
// value) and its provenance header ("" for none).
type provenanceInput struct{ name, path string }

// TestProvenanceHopsAndStrip mirrors records carrying different provenance paths one
// way, A->B with maxHops 2, and checks record by record which reach the target and
// with which header: a local record gets "dc-a", a record with one hop gets its path
// plus "dc-a", a record with two hops is dropped (a third hop exceeds maxHops), records
// whose path names dc-b (the target) are dropped; with strip the kept records reach the
// target without the header; and a CEL filter in the chain sees the incoming header.
// Every drop is counted by its reason and committed.
func TestProvenanceHopsAndStrip(t *testing.T) {
	inputs := []provenanceInput{
		{"local", ""}, {"one-hop", "x"}, {"two-hops", "x,y"}, {"from-target", clusterB},
		{"via-target", "x," + clusterB}, {"from-banned", "banned"},
	}
	tests := map[string]struct {
		strip    bool
		handlers []config.HandlerSpec
		// want maps the names of the records the target must hold, in order, to their
		// provenance header ("" for none).
		want     []provenanceInput
		filtered int64
	}{
		"stamps and drops": {
			want: []provenanceInput{{"local", clusterA}, {"one-hop", "x," + clusterA}, {"from-banned", "banned," + clusterA}},
		},
		"strip": {
			strip: true,
			want:  []provenanceInput{{"local", ""}, {"one-hop", ""}, {"from-banned", ""}},
		},
		"a handler filters on provenance": {
			handlers: []config.HandlerSpec{{CEL: &config.CELHandler{
				Filter: fmt.Sprintf("!(%[1]q in record.headers) || !string(record.headers[%[1]q]).startsWith('banned')", testProvenanceHeader),
			}}},
			want:     []provenanceInput{{"local", clusterA}, {"one-hop", "x," + clusterA}},
			filtered: 1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := newActiveActiveClusters(t, 1)
			produceProvenance(t, c.source, inputs)
			cfg := c.testConfig(t, withProvenance("one-way", func(p *config.Provenance) {
				p.MaxHops = 2
				p.Strip = tc.strip
			}), func(cfg *config.Config) { cfg.Handlers = tc.handlers })
			r := startEngine(t, cfg, testLogger(t))
			testutil.WaitFor(t, 30*time.Second, "the commit at the end of the source partition", func() bool {
				s := r.e.Stats()
				return len(s.Partitions) == 1 && s.Partitions[0].Committed == int64(len(inputs))
			})
			got := readTarget(t, c.target, testTopic, len(tc.want), time.Second, 30*time.Second)[0]
			var names []string
			for _, rec := range got {
				names = append(names, string(rec.Value))
			}
			if len(got) != len(tc.want) {
				t.Fatalf("target holds %v, want %v", names, tc.want)
			}
			for i, rec := range got {
				path, _ := headerValue(rec, testProvenanceHeader)
				if id, _ := headerValue(rec, "id"); string(rec.Value) != tc.want[i].name || path != tc.want[i].path || id != tc.want[i].name {
					t.Fatalf("target record %d is %q (id header %q) with provenance %q, want %q with %q", i, rec.Value, id, path, tc.want[i].name, tc.want[i].path)
				}
				if n := strings.Count(fmt.Sprint(rec.Headers), testProvenanceHeader); n > 1 {
					t.Fatalf("target record %q carries %d provenance headers, want at most 1", rec.Value, n)
				}
			}
			s := r.e.Stats().Partitions[0]
			if s.LoopFromTarget != 2 || s.LoopOverHops != 1 || s.Filtered != tc.filtered {
				t.Fatalf("dropped %d from the target, %d over maxHops, filtered %d; want 2, 1 and %d", s.LoopFromTarget, s.LoopOverHops, s.Filtered, tc.filtered)
			}
			if got := loopDroppedMetric(t, r.e); got[loopReasonFromTarget] != 2 || got[loopReasonMaxHops] != 1 {
				t.Fatalf("%s = %v, want fromTarget 2 and maxHops 1", metricLoopDropped, got)
			}
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
			if off := testutil.CommittedOffsets(t, c.source.ListenAddrs(), "one-way", testTopic, 1); off[0] != int64(len(inputs)) {
				t.Fatalf("source group committed %d, want %d (dropped records are committed)", off[0], len(inputs))
			}
		})
	}
}

// produceProvenance writes one record per input to partition 0 of testTopic, in order:
// value and "id" header its name, and the provenance header when its path is set.
func produceProvenance(t *testing.T, cl *kfake.Cluster, inputs []provenanceInput) {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(cl.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	for _, in := range inputs {
		r := &kgo.Record{Topic: testTopic, Partition: 0, Value: []byte(in.name), Headers: []kgo.RecordHeader{{Key: "id", Value: []byte(in.name)}}}
		if in.path != "" {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: testProvenanceHeader, Value: []byte(in.path)})
		}
		if err := client.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

// loopDroppedMetric sums metricLoopDropped by its reason label.
func loopDroppedMetric(t *testing.T, e *Engine) map[string]float64 {
	t.Helper()
	mfs, err := e.gatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != metricLoopDropped {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "reason" {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// TestProvenanceRefusesClustersWithOneID: when source and target report the same
// cluster id (here two kfake clusters with the default id), provenance could not tell
// them apart, so Run stops at start with an error saying so, having mirrored nothing.
func TestProvenanceRefusesClustersWithOneID(t *testing.T) {
	c := newClusters(t, 1)
	producePlain(t, c.source, testTopic, 1, 10)
	r := startEngine(t, c.testConfig(t, withProvenance("same-id", nil)), testLogger(t))
	err := r.wait(t, 30*time.Second)
	if err == nil || !strings.Contains(err.Error(), `both have the id "kfake"`) {
		t.Fatalf("Run = %v, want an error naming the shared cluster id", err)
	}
	if n := r.e.Stats().Records; n != 0 {
		t.Fatalf("mirrored %d records, want 0", n)
	}
}
