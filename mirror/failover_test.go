package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// failoverOpts are the engine options of a failover in a test: the fast group timings
// and drain limit of startEngine.
func failoverOpts(t *testing.T) []Option {
	return []Option{WithLogger(testLogger(t)), WithDrainTimeout(testDrainTimeout), func(o *options) { o.tuneSarama = fastGroup }}
}

// failoverConfig mirrors testTopic with groups app-.* checkpointed.
func failoverConfig(t *testing.T, c *testClusters) *config.Config {
	return c.testConfig(t, func(cfg *config.Config) {
		cfg.Groups = &config.Groups{Include: []string{"app-.*"}, SyncInterval: config.Duration{Duration: 300 * time.Millisecond}}
	})
}

// newFailoverFixture starts the clusters of a failover test (failoverConfig), writes
// perPartition records to each of partitions, and has group consume and commit
// consumed of them on the source.
func newFailoverFixture(t *testing.T, partitions int32, perPartition int, group string, consumed int) (*testClusters, *config.Config, *workload) {
	t.Helper()
	c := newClusters(t, partitions)
	cfg := failoverConfig(t, c)
	w := newWorkload(partitions)
	w.produce(t, c.source, perPartition)
	consumeAndCommit(t, c.source, group, consumed)
	return c, cfg, w
}

// mirrorUntilCheckpointed starts the mirror and waits until the target holds want
// records and a checkpoint of group.
func mirrorUntilCheckpointed(t *testing.T, c *testClusters, cfg *config.Config, want int, group string) *runningEngine {
	t.Helper()
	r := startEngine(t, cfg, testLogger(t))
	readTarget(t, c.target, testTopic, want, 0, 60*time.Second)
	waitFor(t, 30*time.Second, "a checkpoint of "+group+" on the target", func() bool { return len(targetGroupOffsets(t, c, group)) > 0 })
	return r
}

// checkGroupLandsOn checks that a consumer of the target starting at each translated
// offset of g reads first the record the source group would have read next: the
// translation skips nothing and reads nothing again.
func checkGroupLandsOn(t *testing.T, g FailoverGroup, got targetContent) {
	t.Helper()
	for _, gp := range g.Partitions {
		recs := got[gp.Partition]
		if gp.TargetOffset == int64(len(recs)) {
			if gp.SourceOffset != int64(len(recs)) {
				t.Errorf("group %s %s/%d: source offset %d translated to the target end %d", g.Group, gp.Topic, gp.Partition, gp.SourceOffset, gp.TargetOffset)
			}
			continue
		}
		if gp.TargetOffset < 0 || gp.TargetOffset > int64(len(recs)) {
			t.Errorf("group %s %s/%d: target offset %d outside the target's 0..%d", g.Group, gp.Topic, gp.Partition, gp.TargetOffset, len(recs))
			continue
		}
		r := recs[gp.TargetOffset]
		if _, i := recordID(t, r); int64(i) != gp.SourceOffset {
			t.Errorf("group %s %s/%d: target offset %d holds record %d, want %d (the source group's next record)",
				g.Group, gp.Topic, gp.Partition, gp.TargetOffset, i, gp.SourceOffset)
		}
	}
}

// TestFailoverPlannedDrainsAndCheckpoints: producers stopped, the mirror stopped
// halfway, two groups at different offsets. The planned failover mirrors the rest,
// reports 0 left behind and commits exact translations of both groups.
func TestFailoverPlannedDrainsAndCheckpoints(t *testing.T) {
	const partitions, first, second = 3, 200, 150
	c := newClusters(t, partitions)
	cfg := failoverConfig(t, c)
	w := newWorkload(partitions)
	w.produce(t, c.source, first)
	r := startEngine(t, cfg, testLogger(t))
	readTarget(t, c.target, testTopic, partitions*first, 200*time.Millisecond, 60*time.Second)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	// Written while the mirror was stopped: the failover must mirror these.
	w.produce(t, c.source, second)
	total := w.total()
	consumeAndCommit(t, c.source, "app-all", total)
	consumeAndCommit(t, c.source, "app-half", total/2)

	report, err := Failover(context.Background(), cfg, FailoverOptions{Mode: FailoverPlanned, Timeout: time.Minute}, failoverOpts(t)...)
	if err != nil {
		t.Fatalf("planned failover failed: %v", err)
	}
	if !report.Completed || !report.SourceReachable || report.CutoverAt == nil {
		t.Fatalf("report: completed %v, source reachable %v, cutover %v", report.Completed, report.SourceReachable, report.CutoverAt)
	}
	got := readTarget(t, c.target, testTopic, total, 200*time.Millisecond, 60*time.Second)
	a := audit(t, w, got, true, true)
	if a.missing != 0 {
		t.Fatalf("%d records lost", a.missing)
	}
	if len(report.Partitions) != partitions {
		t.Fatalf("report has %d partitions, want %d", len(report.Partitions), partitions)
	}
	for _, p := range report.Partitions {
		end := int64(first + second)
		if p.SourceEnd == nil || *p.SourceEnd != end || p.LeftBehind == nil || *p.LeftBehind != 0 || p.Committed != end ||
			p.LastMirroredOffset != end-1 || p.TargetEnd != int64(len(got[p.Partition])) {
			t.Errorf("partition %d: %+v (source end %s, left behind %s), want source end %d, 0 left behind, committed %d, last mirrored %d, target end %d",
				p.Partition, p, countOrNote(p.SourceEnd, ""), countOrNote(p.LeftBehind, p.LeftBehindNote), end, end, end-1, len(got[p.Partition]))
			continue
		}
		if last := got[p.Partition][p.LastMirroredTargetOffset]; last == nil {
			t.Errorf("partition %d: no target record at %d", p.Partition, p.LastMirroredTargetOffset)
		} else if _, i := recordID(t, last); int64(i) != p.LastMirroredOffset {
			t.Errorf("partition %d: last mirrored target offset %d holds record %d, want %d", p.Partition, p.LastMirroredTargetOffset, i, p.LastMirroredOffset)
		}
	}
	if len(report.Groups) != 2 || report.Groups[0].Group != "app-all" || report.Groups[1].Group != "app-half" {
		t.Fatalf("report groups %+v, want app-all and app-half", report.Groups)
	}
	for _, g := range report.Groups {
		if len(g.Partitions) == 0 {
			t.Errorf("group %s: no partition translated", g.Group)
		}
		for _, gp := range g.Partitions {
			if !gp.Exact || !gp.Committed || gp.AheadOfMirror {
				t.Errorf("group %s %s/%d: %+v, want exact and committed", g.Group, gp.Topic, gp.Partition, gp)
			}
		}
		checkGroupLandsOn(t, g, got)
		committed := targetGroupOffsets(t, c, g.Group)
		for _, gp := range g.Partitions {
			if committed[gp.Partition] != gp.TargetOffset {
				t.Errorf("group %s partition %d: target group holds %d, report says %d", g.Group, gp.Partition, committed[gp.Partition], gp.TargetOffset)
			}
		}
	}
	if _, err := json.Marshal(report); err != nil {
		t.Fatalf("report is not JSON-serialisable: %v", err)
	}
}

// targetGroupOffsets reads group's committed offsets of testTopic on the target.
func targetGroupOffsets(t *testing.T, c *testClusters, group string) map[int32]int64 {
	t.Helper()
	return groupTopicOffsets(t, c.target, group, testTopic)
}

// groupTopicOffsets reads group's committed offsets of topic on cl (nil if the group
// has none).
func groupTopicOffsets(t *testing.T, cl *kfake.Cluster, group, topic string) map[int32]int64 {
	t.Helper()
	resp, err := clusterAdmin(t, cl).ListConsumerGroupOffsets(group, nil)
	if errors.Is(err, sarama.ErrGroupIDNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	for p, b := range resp.Blocks[topic] {
		out[p] = b.Offset
	}
	return out
}

// TestFailoverPlannedFailsWhileTheSourceGrows: producers that never stop make the
// planned failover fail at its timeout, naming the partitions still behind, without a
// final checkpoint.
func TestFailoverPlannedFailsWhileTheSourceGrows(t *testing.T) {
	c, cfg, w := newFailoverFixture(t, 2, 50, "app-all", 100)
	stopProducing := w.background(t, c.source, 5, 5*time.Millisecond)
	report, err := Failover(context.Background(), cfg, FailoverOptions{Mode: FailoverPlanned, Timeout: 3 * time.Second}, failoverOpts(t)...)
	stopProducing()
	if err == nil {
		t.Fatalf("planned failover completed while the source grew: %+v", report)
	}
	if report.Completed || report.Error != err.Error() {
		t.Errorf("report: completed %v, error %q; want not completed with %q", report.Completed, report.Error, err)
	}
	// Usually the drain is still behind at the timeout; on a busy machine the producer
	// may pause long enough for the drain to catch up, and then the records written
	// while the mirror stopped are found left behind. Both name every partition.
	wants := []string{"did not reach the source's end within 3s", "orders/0 (committed", "orders/1 (committed"}
	if strings.Contains(err.Error(), "the source grew while the mirror stopped") {
		wants = []string{"records were left behind on orders/0 (", "orders/1 ("}
	}
	for _, want := range wants {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	// No final checkpoint (the engine's periodic ones, while it ran, are as usual).
	if len(report.Groups) != 0 {
		t.Errorf("groups checkpointed by a failed failover: %+v", report.Groups)
	}
	// Nothing is lost by the failed attempt: a mirror started again copies the rest.
	total := w.total()
	r := startEngine(t, cfg, testLogger(t))
	got := readTarget(t, c.target, testTopic, total, 300*time.Millisecond, 60*time.Second)
	if a := audit(t, w, got, false, false); a.missing != 0 {
		t.Fatalf("%d records lost", a.missing)
	}
	_ = r.stop(t)
}

// TestFailoverPlannedRefusesAGroupAheadOfTheMirror: a group that committed past what the
// mirror holds (not mirrored that far yet) makes the planned failover refuse to
// complete, before anything is committed.
func TestFailoverPlannedRefusesAGroupAheadOfTheMirror(t *testing.T) {
	c, cfg, w := newFailoverFixture(t, 1, 100, "app-ok", 100)
	// A consumer may commit any offset: this one says it read 3,000 records more.
	commitSourceOffset(t, c, "app-ahead", 0, 3100)
	report, err := Failover(context.Background(), cfg, FailoverOptions{Mode: FailoverPlanned, Timeout: time.Minute}, failoverOpts(t)...)
	if err == nil {
		t.Fatalf("planned failover completed with a group ahead of the mirror: %+v", report.Groups)
	}
	if want := `not mirrored that far yet for group "app-ahead" on orders/0 (committed 3100, mirrored up to 100)`; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	for _, g := range report.Groups {
		for _, gp := range g.Partitions {
			if gp.Committed || !strings.HasPrefix(gp.Result, "not committed") {
				t.Errorf("group %s: %+v, want not committed", g.Group, gp)
			}
			if gp.AheadOfMirror != (g.Group == "app-ahead") {
				t.Errorf("group %s: ahead of mirror %v", g.Group, gp.AheadOfMirror)
			}
		}
	}
	for _, g := range []string{"app-ok", "app-ahead"} {
		if got := targetGroupOffsets(t, c, g); len(got) != 0 {
			t.Errorf("target group %s was committed: %v", g, got)
		}
	}
	// The records themselves were mirrored: the drain is not undone.
	if a := audit(t, w, readTarget(t, c.target, testTopic, 100, 200*time.Millisecond, 30*time.Second), false, false); a.missing != 0 {
		t.Fatalf("%d records lost", a.missing)
	}
}

// commitSourceOffset commits offset for partition p of testTopic to group on the source.
func commitSourceOffset(t *testing.T, c *testClusters, group string, p int32, offset int64) {
	t.Helper()
	commitOffsetOn(t, c.source, group, testTopic, p, offset)
}

// commitOffsetOn commits offset for partition p of topic to group on cl.
func commitOffsetOn(t *testing.T, cl *kfake.Cluster, group, topic string, p int32, offset int64) {
	t.Helper()
	sc := sarama.NewConfig()
	sc.Version = sarama.V3_6_0_0
	client, err := sarama.NewClient(cl.ListenAddrs(), sc)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	coordinator, err := client.Coordinator(group)
	if err != nil {
		t.Fatal(err)
	}
	req := sarama.NewOffsetCommitRequest(sc, group)
	req.AddBlockWithLeaderEpoch(topic, p, offset, -1, 0, "")
	resp, err := coordinator.CommitOffset(req)
	if err != nil {
		t.Fatal(err)
	}
	if kerr := resp.Errors[topic][p]; !errors.Is(kerr, sarama.ErrNoError) {
		t.Fatalf("committing %s %s/%d: %v", group, topic, p, kerr)
	}
}

// closedAddress returns an address on which nothing listens.
func closedAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// TestFailoverImmediateReportsWhatWasLeftBehind: the mirror stops mid-stream while the
// producers go on. An immediate failover with the source unreachable reports "unknown"
// and the last records mirrored; one with the source back reports the count. Both
// agree with an audit of the target, and the groups' checkpoints are written from what
// the target holds.
func TestFailoverImmediateReportsWhatWasLeftBehind(t *testing.T) {
	const partitions = 2
	c, cfg, w := newFailoverFixture(t, partitions, 100, "app-early", 80)
	stopProducing := w.background(t, c.source, 10, 10*time.Millisecond)
	r := mirrorUntilCheckpointed(t, c, cfg, partitions*100, "app-early")
	// The cut: the mirror stops while the producers write on.
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	stopProducing()
	w.produce(t, c.source, 30)

	unreachable := *cfg
	unreachable.Source.BootstrapServers = []string{closedAddress(t)}
	cut, err := Failover(context.Background(), &unreachable, FailoverOptions{Mode: FailoverImmediate, Timeout: 5 * time.Second}, failoverOpts(t)...)
	if err != nil {
		t.Fatalf("immediate failover without the source failed: %v", err)
	}
	if cut.SourceReachable || !cut.Completed || len(cut.Partitions) != partitions {
		t.Fatalf("report: source reachable %v, completed %v, %d partitions", cut.SourceReachable, cut.Completed, len(cut.Partitions))
	}
	// The source is back: the audit and a second report, with counts.
	back, err := Failover(context.Background(), cfg, FailoverOptions{Mode: FailoverImmediate, Timeout: 5 * time.Second}, failoverOpts(t)...)
	if err != nil {
		t.Fatalf("immediate failover with the source failed: %v", err)
	}
	got := readTarget(t, c.target, testTopic, 0, 300*time.Millisecond, 30*time.Second)
	missing := missingOnTarget(t, w, got, true)
	ends := topicEndOffsets(t, c.source, testTopic)
	for i, p := range cut.Partitions {
		if p.LeftBehind != nil || p.LeftBehindNote != UnknownSourceUnreachable || p.SourceEnd != nil {
			t.Errorf("partition %d without the source: left behind %s, source end %v; want %q", p.Partition,
				countOrNote(p.LeftBehind, p.LeftBehindNote), p.SourceEnd, UnknownSourceUnreachable)
		}
		if derived := ends[p.Partition] - (p.LastMirroredOffset + 1); derived != missing[p.Partition] || missing[p.Partition] == 0 {
			t.Errorf("partition %d: last mirrored %d leaves %d behind of source end %d; the audit finds %d missing",
				p.Partition, p.LastMirroredOffset, derived, ends[p.Partition], missing[p.Partition])
		}
		if p.TargetEnd != int64(len(got[p.Partition])) {
			t.Errorf("partition %d: target end %d, the target holds %d", p.Partition, p.TargetEnd, len(got[p.Partition]))
		}
		b := back.Partitions[i]
		if b.LeftBehind == nil || *b.LeftBehind != missing[b.Partition] || b.SourceEnd == nil || *b.SourceEnd != ends[b.Partition] {
			t.Errorf("partition %d with the source: left behind %s, source end %v; the audit finds %d missing of %d",
				b.Partition, countOrNote(b.LeftBehind, b.LeftBehindNote), b.SourceEnd, missing[b.Partition], ends[b.Partition])
		}
	}
	for _, rep := range []*FailoverReport{cut, back} {
		if len(rep.Groups) != 1 || rep.Groups[0].Group != "app-early" {
			t.Fatalf("groups %+v, want app-early", rep.Groups)
		}
		g := rep.Groups[0]
		for _, gp := range g.Partitions {
			if gp.TargetOffset < 0 || !gp.Exact || (!gp.Committed && gp.Result != "unchanged") {
				t.Errorf("group %s %s/%d: %+v, want an exact checkpoint", g.Group, gp.Topic, gp.Partition, gp)
			}
		}
		checkGroupLandsOn(t, g, got)
	}
}

// waitFor polls cond until it holds, or fails after ceiling.
func waitFor(t *testing.T, ceiling time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(ceiling)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %v", what, ceiling)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestFailoverImmediateAfterTheSourceWasCutOff: the source cluster goes away while the
// mirror lags (its fetches fail, then the cluster is closed) and the mirror is then
// stopped. An immediate failover reports "unknown: source unreachable", and the last
// records it says were mirrored leave behind exactly what an audit of the target finds
// missing of what the producer wrote. The group's checkpoint is written from the target.
func TestFailoverImmediateAfterTheSourceWasCutOff(t *testing.T) {
	const partitions, mirrored, behind = 2, 100, 50
	c, cfg, w := newFailoverFixture(t, partitions, mirrored, "app-early", 60)
	r := mirrorUntilCheckpointed(t, c, cfg, partitions*mirrored, "app-early")
	// The cut: the mirror's fetches fail from now on, the producer writes on, then the
	// cluster is gone.
	c.source.ControlKey(kmsg.Fetch.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.source.KeepControl()
		return nil, errors.New("the source is cut off"), true
	})
	w.produce(t, c.source, behind)
	c.source.Close()
	if err := r.stop(t); err != nil {
		t.Logf("the mirror stopped with: %v", err)
	}

	report, err := Failover(context.Background(), cfg, FailoverOptions{Mode: FailoverImmediate, Timeout: 5 * time.Second}, failoverOpts(t)...)
	if err != nil {
		t.Fatalf("immediate failover failed: %v", err)
	}
	if report.SourceReachable || !report.Completed || len(report.Partitions) != partitions {
		t.Fatalf("report: source reachable %v, completed %v, partitions %+v", report.SourceReachable, report.Completed, report.Partitions)
	}
	got := readTarget(t, c.target, testTopic, 0, 300*time.Millisecond, 30*time.Second)
	missing := missingOnTarget(t, w, got, true)
	// A fetch the source had received before the cut may still bring a few of them.
	if n := missing[0] + missing[1]; n == 0 || n > partitions*behind {
		t.Errorf("the audit finds %v missing, want up to the %d written after the cut", missing, partitions*behind)
	}
	leftBehind := int64(0)
	for _, p := range report.Partitions {
		if p.LeftBehind != nil || p.LeftBehindNote != UnknownSourceUnreachable {
			t.Errorf("partition %d: left behind %s, want %q", p.Partition, countOrNote(p.LeftBehind, p.LeftBehindNote), UnknownSourceUnreachable)
		}
		// The producer's own count stands for the source's end, which cannot be read.
		leftBehind += int64(w.next[p.Partition]) - (p.LastMirroredOffset + 1)
		if p.TargetEnd != int64(len(got[p.Partition])) || p.LastMirroredTargetOffset != p.TargetEnd-1 {
			t.Errorf("partition %d: %+v; the target holds %d", p.Partition, p, len(got[p.Partition]))
		}
	}
	if leftBehind != missing[0]+missing[1] {
		t.Errorf("the report's last mirrored offsets leave %d behind, the audit finds %v missing", leftBehind, missing)
	}
	if len(report.Groups) != 1 || report.Groups[0].Group != "app-early" {
		t.Fatalf("groups %+v, want app-early", report.Groups)
	}
	for _, gp := range report.Groups[0].Partitions {
		if !gp.Exact || gp.TargetOffset < 0 {
			t.Errorf("app-early %s/%d: %+v, want an exact checkpoint", gp.Topic, gp.Partition, gp)
		}
	}
	checkGroupLandsOn(t, report.Groups[0], got)
}

// missingOnTarget audits the target against what w wrote, which may be more than was
// mirrored: it counts per partition the records the target lacks, and fails on a record
// in the wrong partition and, when ordered, on one out of order or seen twice.
func missingOnTarget(t *testing.T, w *workload, got targetContent, ordered bool) map[int32]int64 {
	t.Helper()
	missing := map[int32]int64{}
	for p := int32(0); p < w.partitions; p++ {
		seen := map[int]bool{}
		last := -1
		for _, rec := range got[p] {
			sp, i := recordID(t, rec)
			if sp != p || (ordered && i <= last) {
				t.Fatalf("target partition %d holds record %d/%d after %d", p, sp, i, last)
			}
			last = i
			seen[i] = true
		}
		for i := 0; i < w.next[p]; i++ {
			if !seen[i] {
				missing[p]++
			}
		}
	}
	return missing
}

// TestFailoverRefusesToRunNextToARunningMirror: while the mirror's own engine runs
// (its group has members), a planned failover waits for it to stop and fails at its
// timeout, and an immediate one refuses at once; neither commits a checkpoint.
//
// The mirror's streams are static members (consumer.groupInstanceId, as the operator
// sets it): they count as members while they run, and the failover, whose own engine
// joins as a dynamic member, runs once they removed themselves on their clean stop.
func TestFailoverRefusesToRunNextToARunningMirror(t *testing.T) {
	c := newClusters(t, 1)
	cfg := c.testConfig(t, func(cfg *config.Config) {
		cfg.Groups = &config.Groups{Include: []string{"app-.*"}, SyncInterval: config.Duration{Duration: 300 * time.Millisecond}}
		cfg.Consumer = &config.Consumer{GroupInstanceID: "mirror-pod-0"}
	})
	w := newWorkload(1)
	w.produce(t, c.source, 20)
	r := startEngine(t, cfg, testLogger(t))
	readTarget(t, c.target, testTopic, 20, 0, 60*time.Second)
	for _, mode := range []FailoverMode{FailoverPlanned, FailoverImmediate} {
		report, err := Failover(context.Background(), cfg, FailoverOptions{Mode: mode, Timeout: 2 * time.Second}, failoverOpts(t)...)
		if err == nil || !strings.Contains(err.Error(), `the mirror is still running: its consumer group "mirror-test" has `) {
			t.Errorf("%s failover next to a running mirror: error %v", mode, err)
		}
		if report.Completed || len(report.Groups) != 0 {
			t.Errorf("%s failover: completed %v, groups %+v", mode, report.Completed, report.Groups)
		}
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	// Once it stopped, the planned failover runs.
	report, err := Failover(context.Background(), cfg, FailoverOptions{Mode: FailoverPlanned, Timeout: time.Minute}, failoverOpts(t)...)
	if err != nil || report.Partitions[0].LeftBehind == nil || *report.Partitions[0].LeftBehind != 0 {
		t.Fatalf("planned failover after the mirror stopped: %v, %+v", err, report.Partitions)
	}
}

// TestFailoverPlannedExactlyOnce: with delivery exactlyOnce the mirror's progress lives
// on the target, written in the transactions; the planned failover drains by it and
// leaves nothing behind, every record once.
func TestFailoverPlannedExactlyOnce(t *testing.T) {
	const partitions = 2
	c := newClusters(t, partitions)
	cfg := c.testConfig(t, func(cfg *config.Config) {
		cfg.Delivery = config.DeliveryExactlyOnce
		cfg.Groups = &config.Groups{Include: []string{"app-.*"}}
	})
	w := newWorkload(partitions)
	w.produce(t, c.source, 120)
	consumeAndCommit(t, c.source, "app-all", w.total())
	report, err := Failover(context.Background(), cfg, FailoverOptions{Mode: FailoverPlanned, Timeout: time.Minute}, failoverOpts(t)...)
	if err != nil {
		t.Fatalf("planned failover failed: %v", err)
	}
	got := readTargetCommitted(t, c.target, testTopic, w.total(), 300*time.Millisecond, 60*time.Second)
	if a := audit(t, w, got, true, true); a.missing != 0 || a.duplicates != 0 {
		t.Fatalf("%d records lost, %d twice", a.missing, a.duplicates)
	}
	for _, p := range report.Partitions {
		if p.LeftBehind == nil || *p.LeftBehind != 0 || p.Committed != 120 {
			t.Errorf("partition %d: %+v, want 0 left behind, committed 120", p.Partition, p)
		}
	}
	if len(report.Groups) != 1 {
		t.Fatalf("groups %+v, want app-all", report.Groups)
	}
	for _, gp := range report.Groups[0].Partitions {
		if !gp.Committed || gp.TargetOffset < 0 {
			t.Errorf("app-all %s/%d: %+v, want committed", gp.Topic, gp.Partition, gp)
		}
	}
}

// TestFailoverImmediateAfterACrash: the mirror is killed mid-stream (no drain, no last
// offset syncs or commits). The immediate failover's left-behind count never hides a
// missing record: it is at least what the audit finds missing, and where the target may
// hold records after the last offset sync it says "at most".
func TestFailoverImmediateAfterACrash(t *testing.T) {
	const partitions = 2
	c := newClusters(t, partitions)
	cfg := failoverConfig(t, c)
	w := newWorkload(partitions)
	w.produce(t, c.source, 50)
	stopProducing := w.background(t, c.source, 10, 5*time.Millisecond)
	r := startEngine(t, cfg, testLogger(t))
	readTarget(t, c.target, testTopic, partitions*200, 0, 60*time.Second)
	r.e.Abort()
	if err := r.wait(t, stopCeiling(testDrainTimeout)); err != nil {
		t.Fatal(err)
	}
	stopProducing()
	<-r.e.Closed()

	report, err := Failover(context.Background(), cfg, FailoverOptions{Mode: FailoverImmediate, Timeout: 5 * time.Second}, failoverOpts(t)...)
	if err != nil {
		t.Fatalf("immediate failover failed: %v", err)
	}
	got := readTarget(t, c.target, testTopic, 0, 300*time.Millisecond, 30*time.Second)
	// After a crash the restarted sends may bring a record again, out of order.
	missing := missingOnTarget(t, w, got, false)
	for _, p := range report.Partitions {
		if p.LeftBehind == nil {
			t.Fatalf("partition %d: no count with the source up: %q", p.Partition, p.LeftBehindNote)
		}
		t.Logf("partition %d: %d left behind (%q), the audit finds %d missing", p.Partition, *p.LeftBehind, p.LeftBehindNote, missing[p.Partition])
		switch {
		case *p.LeftBehind < missing[p.Partition]:
			t.Errorf("partition %d: %d left behind, but %d records are missing", p.Partition, *p.LeftBehind, missing[p.Partition])
		case *p.LeftBehind > missing[p.Partition] && !strings.HasPrefix(p.LeftBehindNote, "at most: "):
			t.Errorf("partition %d: %d left behind while %d are missing, without saying it is at most", p.Partition, *p.LeftBehind, missing[p.Partition])
		}
	}
}
