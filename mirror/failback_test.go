package mirror

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// backBase is the first record index of the records written to the target after the
// cutover, so that they are told apart from the mirrored ones on the source.
const backBase = 1000

// reverseConfig is the failback mirror of c's forward mirror ("mirror-test"): from
// c.target to c.source, with provenance and initialPositions.fromFailover.
func reverseConfig(t *testing.T, c *testClusters, mutate ...func(*config.Config)) *config.Config {
	t.Helper()
	rc := &testClusters{source: c.target, target: c.source}
	return rc.testConfig(t, append([]func(*config.Config){func(cfg *config.Config) {
		cfg.ConsumerGroup = "mirror-back"
		cfg.Provenance = &config.Provenance{Enabled: true}
		cfg.InitialPositions = &config.InitialPositions{FromFailover: "mirror-test"}
	}}, mutate...)...)
}

// afterCutover is a workload of records written to the target after the cutover:
// indexes from backBase on.
func afterCutover(partitions int32) *workload {
	w := newWorkload(partitions)
	for p := range w.next {
		w.next[p] = backBase
	}
	return w
}

// checkFailedBack checks that each partition of the source holds the records it held
// (indexes 0 up to before[p]) and then the records written to the target after the
// cutover (back's, from backBase), each once and in order: nothing mirrored before
// the cutover came back.
func checkFailedBack(t *testing.T, got targetContent, before map[int32]int, back *workload) {
	t.Helper()
	for p := int32(0); p < back.partitions; p++ {
		var want []int
		for i := 0; i < before[p]; i++ {
			want = append(want, i)
		}
		for i := backBase; i < back.next[p]; i++ {
			want = append(want, i)
		}
		recs := got[p]
		if len(recs) != len(want) {
			t.Errorf("source partition %d holds %d records, want %d (%d of its own, %d failed back)", p, len(recs), len(want), before[p], back.next[p]-backBase)
		}
		for j := 0; j < min(len(recs), len(want)); j++ {
			sp, i := recordID(t, recs[j])
			if sp != p || i != want[j] {
				t.Errorf("source partition %d offset %d holds record %d/%d, want %d/%d", p, j, sp, i, p, want[j])
				break
			}
			if i >= backBase {
				// As written on the target, plus the failback mirror's provenance.
				rec := *recs[j]
				rec.Headers = slices.DeleteFunc(slices.Clone(rec.Headers), func(h kgo.RecordHeader) bool { return h.Key == config.DefaultProvenanceHeader })
				checkRecord(t, back.record(p, i), &rec)
			}
		}
	}
}

// TestFailbackAfterPlannedFailover: a planned failover, records written to the target
// afterwards, then the reverse mirror with fromFailover: the source gets exactly the
// records written after the cutover, once, and none of the mirrored ones again.
func TestFailbackAfterPlannedFailover(t *testing.T) {
	const partitions, first = 2, 100
	c := newClusters(t, partitions, kfake.ClusterID("cluster-b"))
	cfg := failoverConfig(t, c)
	w := newWorkload(partitions)
	w.produce(t, c.source, first)
	if _, err := Failover(context.Background(), cfg, FailoverOptions{Mode: FailoverPlanned, Timeout: time.Minute}, failoverOpts(t)...); err != nil {
		t.Fatalf("planned failover failed: %v", err)
	}
	fb := readFailback(t, c.target, "mirror-test")
	if fb.Header.Mode != FailoverPlanned || len(fb.Points) != partitions {
		t.Fatalf("failback record: %+v", fb)
	}
	for _, p := range fb.Points {
		if p.Topic != testTopic || p.Offset != first || p.TopicID == "" || p.LeftBehind == nil || *p.LeftBehind != 0 {
			t.Errorf("failback point %+v, want %s at %d with a topic ID and 0 left behind", p, testTopic, first)
		}
	}
	back := afterCutover(partitions)
	back.produce(t, c.target, 40)

	r := startEngine(t, reverseConfig(t, c), testLogger(t))
	got := readTarget(t, c.source, testTopic, partitions*(first+40), 500*time.Millisecond, 60*time.Second)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	checkFailedBack(t, got, map[int32]int{0: first, 1: first}, back)
}

// TestFailbackAfterImmediateFailover: the mirror stops mid-stream while the producers
// write on (left behind), an immediate failover, records written to the target, then
// the failback. The source gets exactly the records written after the cutover, and the
// left-behind records the failback points list are what the target lacks.
func TestFailbackAfterImmediateFailover(t *testing.T) {
	const partitions = 2
	c := newClusters(t, partitions, kfake.ClusterID("cluster-b"))
	cfg := failoverConfig(t, c)
	w := newWorkload(partitions)
	w.produce(t, c.source, 80)
	r := startEngine(t, cfg, testLogger(t))
	readTarget(t, c.target, testTopic, partitions*80, 0, 60*time.Second)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	w.produce(t, c.source, 25) // left behind
	if _, err := Failover(context.Background(), cfg, FailoverOptions{Mode: FailoverImmediate, Timeout: 5 * time.Second}, failoverOpts(t)...); err != nil {
		t.Fatalf("immediate failover failed: %v", err)
	}
	onTarget := readTarget(t, c.target, testTopic, 0, 300*time.Millisecond, 30*time.Second)
	missing := missingOnTarget(t, w, onTarget, true)
	fb := readFailback(t, c.target, "mirror-test")
	for _, p := range fb.Points {
		if p.LeftBehind == nil || *p.LeftBehind != missing[p.Partition] || *p.LeftBehind == 0 ||
			p.SourceEnd == nil || *p.SourceEnd-(p.LastMirroredOffset+1) != missing[p.Partition] || p.Offset != int64(len(onTarget[p.Partition])) {
			t.Errorf("failback point %+v: the audit finds %d missing of the target's %d", p, missing[p.Partition], len(onTarget[p.Partition]))
		}
	}
	back := afterCutover(partitions)
	back.produce(t, c.target, 30)
	r = startEngine(t, reverseConfig(t, c), testLogger(t))
	before := map[int32]int{0: w.next[0], 1: w.next[1]}
	got := readTarget(t, c.source, testTopic, w.total()+partitions*30, 500*time.Millisecond, 60*time.Second)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	// The left-behind records stay where they were, before the failed-back ones.
	checkFailedBack(t, got, before, back)
}

// TestFailbackResumesFromItsOwnProgress: a failback mirror stopped and started again
// resumes from its own progress, not from the failback points.
func TestFailbackResumesFromItsOwnProgress(t *testing.T) {
	const partitions = 2
	c := newClusters(t, partitions, kfake.ClusterID("cluster-b"))
	cfg := failoverConfig(t, c)
	w := newWorkload(partitions)
	w.produce(t, c.source, 50)
	if _, err := Failover(context.Background(), cfg, FailoverOptions{Mode: FailoverPlanned, Timeout: time.Minute}, failoverOpts(t)...); err != nil {
		t.Fatal(err)
	}
	back := afterCutover(partitions)
	back.produce(t, c.target, 20)
	rcfg := reverseConfig(t, c)
	r := startEngine(t, rcfg, testLogger(t))
	readTarget(t, c.source, testTopic, partitions*70, 300*time.Millisecond, 60*time.Second)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	back.produce(t, c.target, 15)
	r = startEngine(t, rcfg, testLogger(t))
	got := readTarget(t, c.source, testTopic, partitions*85, 500*time.Millisecond, 60*time.Second)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	checkFailedBack(t, got, map[int32]int{0: 50, 1: 50}, back)
}

// TestFailbackIgnoresThePointOfARecreatedTopic: the target topic deleted and created
// again after the cutover has another ID: its failback point is not used, and the
// partition starts at initialOffset (oldest: the new topic's every record).
func TestFailbackIgnoresThePointOfARecreatedTopic(t *testing.T) {
	const partitions = 1
	c := newClusters(t, partitions, kfake.ClusterID("cluster-b"))
	cfg := failoverConfig(t, c)
	w := newWorkload(partitions)
	w.produce(t, c.source, 60)
	if _, err := Failover(context.Background(), cfg, FailoverOptions{Mode: FailoverPlanned, Timeout: time.Minute}, failoverOpts(t)...); err != nil {
		t.Fatal(err)
	}
	recreateTopic(t, c.target, testTopic, partitions)
	back := afterCutover(partitions)
	back.produce(t, c.target, 10) // offsets 0..9 of the new topic, below the point 60
	r := startEngine(t, reverseConfig(t, c), testLogger(t))
	got := readTarget(t, c.source, testTopic, 70, 500*time.Millisecond, 60*time.Second)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	checkFailedBack(t, got, map[int32]int{0: 60}, back)
}

// TestFailbackWithoutAFailoverRecordStops: fromFailover naming a mirror that wrote no
// failover record on the source stops the engine with an error naming the field and
// what it looked for.
func TestFailbackWithoutAFailoverRecordStops(t *testing.T) {
	c := newClusters(t, 1, kfake.ClusterID("cluster-b"))
	for name, setup := range map[string]func(){
		"no progress topic": func() {},
		"progress topic without a failover record": func() {
			r := startEngine(t, failoverConfig(t, c), testLogger(t))
			waitFor(t, 30*time.Second, "the progress topic", func() bool { return topicEndOffsets(t, c.target, ProgressTopic("mirror-test")) != nil })
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			setup()
			r := startEngine(t, reverseConfig(t, c), testLogger(t))
			err := r.wait(t, 60*time.Second)
			if err == nil || !strings.Contains(err.Error(), `initialPositions.fromFailover: "mirror-test": no failover of mirror "mirror-test": `) ||
				!strings.Contains(err.Error(), ProgressTopic("mirror-test")) {
				t.Fatalf("Run returned %v, want an error naming initialPositions.fromFailover and the progress topic", err)
			}
		})
	}
}

// readFailback reads the failback points of mirror from cl.
func readFailback(t *testing.T, cl *kfake.Cluster, mirror string) *Failback {
	t.Helper()
	sc := sarama.NewConfig()
	sc.Version = sarama.V3_6_0_0
	client, err := sarama.NewClient(cl.ListenAddrs(), sc)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	fb, err := ReadFailback(context.Background(), client, mirror)
	if err != nil {
		t.Fatal(err)
	}
	return fb
}

// recreateTopic deletes topic on cl and creates it again with partitions.
func recreateTopic(t *testing.T, cl *kfake.Cluster, topic string, partitions int32) {
	t.Helper()
	sc := sarama.NewConfig()
	sc.Version = sarama.V3_6_0_0
	admin, err := sarama.NewClusterAdmin(cl.ListenAddrs(), sc)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if err := admin.DeleteTopic(topic); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "topic deletion", func() bool {
		err := admin.CreateTopic(topic, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: 1}, false)
		return err == nil || !errors.Is(err, sarama.ErrTopicAlreadyExists)
	})
}

// TestFailbackMovesGroupsBackSkippingNothing: two application groups moved to the
// target by a planned failover and back by the failback mirror's checkpoints. The
// target topic held records of its own before the mirror started, so source and target
// offsets differ. One group read everything on the target: its offset past the
// failback point translates through the failback mirror's offset syncs to the source's
// end. The other committed on the target BELOW the failback point (it had not read
// everything mirrored before the cutover): the failback mirror has no offset sync
// there, so it translates through the failed-over mirror's syncs, exactly, to the
// source offset of the first record the group had not read.
func TestFailbackMovesGroupsBackSkippingNothing(t *testing.T) {
	const partitions, first, after, foreign = 2, 100, 40, 25
	c := newClusters(t, partitions, kfake.ClusterID("cluster-b"))
	cfg := failoverConfig(t, c)
	// The target's own records, before the mirror's copies.
	own := newWorkload(partitions)
	for p := range own.next {
		own.next[p] = 5000
	}
	createTopic(t, c.target, testTopic, partitions, nil)
	own.produce(t, c.target, foreign)
	w := newWorkload(partitions)
	w.produce(t, c.source, first)
	consumeAndCommit(t, c.source, "app-done", partitions*first)
	for p := int32(0); p < partitions; p++ {
		commitSourceOffset(t, c, "app-mid", p, 60)
	}
	if _, err := Failover(context.Background(), cfg, FailoverOptions{Mode: FailoverPlanned, Timeout: time.Minute}, failoverOpts(t)...); err != nil {
		t.Fatal(err)
	}
	point := int64(foreign + first)
	if got := groupOffsetsOn(t, c.target, "app-mid"); got[0] != foreign+60 || got[1] != foreign+60 {
		t.Fatalf("app-mid on the target after the failover: %v, want %d", got, foreign+60)
	}
	back := afterCutover(partitions)
	back.produce(t, c.target, after)
	// On the target: app-done reads everything written after the cutover, app-mid
	// reads on (20 and 21 records) but stops below the failback point.
	consumeAndCommit(t, c.target, "app-done", partitions*after)
	for p := int32(0); p < partitions; p++ {
		commitSourceOffset(t, &testClusters{source: c.target}, "app-mid", p, foreign+80+int64(p))
	}

	rcfg := reverseConfig(t, c, func(cfg *config.Config) {
		cfg.Groups = &config.Groups{Include: []string{"app-.*"}, SyncInterval: config.Duration{Duration: 300 * time.Millisecond}}
	})
	r := startEngine(t, rcfg, testLogger(t))
	got := readTarget(t, c.source, testTopic, partitions*(first+after), 500*time.Millisecond, 60*time.Second)
	waitFor(t, 30*time.Second, "both groups checkpointed back on the source", func() bool {
		d, m := groupOffsetsOn(t, c.source, "app-done"), groupOffsetsOn(t, c.source, "app-mid")
		return d[0] == first+after && d[1] == first+after && m[0] == 80 && m[1] == 81
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	checkFailedBack(t, got, map[int32]int{0: first, 1: first}, back)
	t.Logf("app-mid: target offsets %d and %d (below the failback point %d) translated to source offsets %v: 0 read again, 0 skipped",
		foreign+80, foreign+81, point, groupOffsetsOn(t, c.source, "app-mid"))
}

// groupOffsetsOn reads group's committed offsets of testTopic on cl.
func groupOffsetsOn(t *testing.T, cl *kfake.Cluster, group string) map[int32]int64 {
	t.Helper()
	return targetGroupOffsets(t, &testClusters{target: cl}, group)
}

// TestFailbackExactlyOnceAndListedOffsets: the failback mirror with delivery
// exactlyOnce starts at the failback points too, and an initialPositions.offsets entry
// wins over the failover's point of its partition.
func TestFailbackExactlyOnceAndListedOffsets(t *testing.T) {
	const partitions, first = 2, 60
	c := newClusters(t, partitions, kfake.ClusterID("cluster-b"))
	cfg := failoverConfig(t, c)
	w := newWorkload(partitions)
	w.produce(t, c.source, first)
	if _, err := Failover(context.Background(), cfg, FailoverOptions{Mode: FailoverPlanned, Timeout: time.Minute}, failoverOpts(t)...); err != nil {
		t.Fatal(err)
	}
	back := afterCutover(partitions)
	back.produce(t, c.target, 30)
	rcfg := reverseConfig(t, c, func(cfg *config.Config) {
		cfg.Delivery = config.DeliveryExactlyOnce
		// Partition 1 starts 10 records after its failback point.
		cfg.InitialPositions.Offsets = []config.PartitionOffset{{Topic: testTopic, Partition: 1, Offset: first + 10}}
	})
	r := startEngine(t, rcfg, testLogger(t))
	got := readTargetCommitted(t, c.source, testTopic, 2*first+30+20, 500*time.Millisecond, 60*time.Second)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	// Partition 1 lacks the 10 records before its listed offset.
	var want []int
	for i := 0; i < first; i++ {
		want = append(want, i)
	}
	for i := backBase + 10; i < backBase+30; i++ {
		want = append(want, i)
	}
	var ids []int
	for _, rec := range got[1] {
		_, i := recordID(t, rec)
		ids = append(ids, i)
	}
	if !slices.Equal(ids, want) {
		t.Errorf("source partition 1 holds %v, want %v", ids, want)
	}
	checkFailedBack(t, targetContent{0: got[0]}, map[int32]int{0: first}, &workload{partitions: 1, base: back.base, next: back.next[:1]})
}
