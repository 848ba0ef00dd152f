package mirror

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// TestFailbackReversesAPrefixRename: the forward mirror renamed orders to dc1.orders;
// after a planned failover the failback mirror reads dc1.orders (where the failback
// points are, keyed by the failed-over mirror's target topic) and, with
// topics.rename.stripPrefix "dc1.", writes into orders on the original source: exactly
// the records written to dc1.orders after the cutover, once, and no dc1.orders topic
// on the original source.
func TestFailbackReversesAPrefixRename(t *testing.T) {
	const partitions, first, after = 2, 100, 40
	const renamed = "dc1." + testTopic
	c := newClusters(t, partitions, kfake.ClusterID("cluster-b"))
	cfg := c.testConfig(t, func(cfg *config.Config) {
		cfg.Topics.Rename = &config.Rename{Prefix: "dc1."}
	})
	w := newWorkload(partitions)
	w.produce(t, c.source, first)
	if _, err := Failover(context.Background(), cfg, FailoverOptions{Mode: FailoverPlanned, Timeout: time.Minute}, failoverOpts(t)...); err != nil {
		t.Fatalf("planned failover failed: %v", err)
	}
	fb := readFailback(t, c.target, "mirror-test")
	if len(fb.Points) != partitions {
		t.Fatalf("failback record: %+v", fb)
	}
	for _, p := range fb.Points {
		if p.Topic != renamed || p.SourceTopic != testTopic || p.Offset != first {
			t.Errorf("failback point %+v, want %s (from %s) at %d", p, renamed, testTopic, first)
		}
	}
	back := afterCutover(partitions)
	back.topic = renamed
	back.produce(t, c.target, after)

	rcfg := reverseConfig(t, c, func(cfg *config.Config) {
		cfg.Topics.Include = []string{`dc1\..*`}
		cfg.Topics.Rename = &config.Rename{StripPrefix: "dc1."}
	})
	plan, err := PlanFailback(context.Background(), rcfg, failoverOpts(t)...)
	if err != nil {
		t.Fatalf("PlanFailback: %v", err)
	}
	for _, p := range plan.Partitions {
		if p.Topic != renamed || p.Start != first || p.ToCopy != after {
			t.Errorf("plan partition %+v, want %s from %d with %d to copy back", p, renamed, first, after)
		}
	}
	for _, lb := range plan.LeftBehind {
		if lb.Topic != testTopic || lb.Count != 0 {
			t.Errorf("left behind %+v, want none on %s", lb, testTopic)
		}
	}

	lines, log := newLogLines(t)
	r := startEngine(t, rcfg, log)
	got := readTarget(t, c.source, testTopic, partitions*(first+after), 500*time.Millisecond, 60*time.Second)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if n := lines.count("Warning: failing back into another topic"); n != 0 {
		t.Errorf("%d warnings of a rename not reversed, with the rename reversed", n)
	}
	checkFailedBack(t, got, map[int32]int{0: first, 1: first}, back)
	if ends := topicEndOffsets(t, c.source, renamed); ends != nil {
		t.Errorf("the original source has a topic %s (ends %v): the failback did not strip the prefix", renamed, ends)
	}
}

// TestFailbackMovesGroupsBackThroughARename: groups translated across the forward
// mirror's prefix rename (orders -> dc1.orders) come back onto orders when the
// failback mirror strips the prefix. A group that read all of dc1.orders ends at the
// end of orders; one that stopped below the failback point is mapped exactly through
// the failed-over mirror's syncs: 0 records skipped, 0 read again. The original source
// gets no group offsets on a dc1.orders.
func TestFailbackMovesGroupsBackThroughARename(t *testing.T) {
	const partitions, first, after, mid = 2, 100, 40, 60
	const renamed = "dc1." + testTopic
	groups := &config.Groups{Include: []string{"app-.*"}, SyncInterval: config.Duration{Duration: 300 * time.Millisecond}}
	c := newClusters(t, partitions, kfake.ClusterID("cluster-b"))
	cfg := c.testConfig(t, func(cfg *config.Config) {
		cfg.Topics.Rename = &config.Rename{Prefix: "dc1."}
		cfg.Groups = groups
	})
	w := newWorkload(partitions)
	w.produce(t, c.source, first)
	for p := int32(0); p < partitions; p++ {
		commitOffsetOn(t, c.source, "app-mid", testTopic, p, mid)
	}
	if _, err := Failover(context.Background(), cfg, FailoverOptions{Mode: FailoverPlanned, Timeout: time.Minute}, failoverOpts(t)...); err != nil {
		t.Fatalf("planned failover failed: %v", err)
	}
	if got := groupTopicOffsets(t, c.target, "app-mid", renamed); got[0] != mid || got[1] != mid {
		t.Fatalf("app-mid on the target's %s after the failover: %v, want %d on each partition", renamed, got, mid)
	}
	back := afterCutover(partitions)
	back.topic = renamed
	back.produce(t, c.target, after)
	// On the target: app-done read everything, app-mid read on to 80 and 81, below the
	// failback point (100).
	for p := int32(0); p < partitions; p++ {
		commitOffsetOn(t, c.target, "app-done", renamed, p, first+after)
		commitOffsetOn(t, c.target, "app-mid", renamed, p, 80+int64(p))
	}

	rcfg := reverseConfig(t, c, func(cfg *config.Config) {
		cfg.Topics.Include = []string{`dc1\..*`}
		cfg.Topics.Rename = &config.Rename{StripPrefix: "dc1."}
		cfg.Groups = groups
	})
	r := startEngine(t, rcfg, testLogger(t))
	got := readTarget(t, c.source, testTopic, partitions*(first+after), 500*time.Millisecond, 60*time.Second)
	var done, mids map[int32]int64
	waitFor(t, 30*time.Second, "both groups checkpointed back onto "+testTopic+" on the source", func() bool {
		done, mids = groupTopicOffsets(t, c.source, "app-done", testTopic), groupTopicOffsets(t, c.source, "app-mid", testTopic)
		return done[0] == first+after && done[1] == first+after && mids[0] == 80 && mids[1] == 81
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	checkFailedBack(t, got, map[int32]int{0: first, 1: first}, back)
	for _, g := range []string{"app-done", "app-mid"} {
		if o := groupTopicOffsets(t, c.source, g, renamed); len(o) != 0 {
			t.Errorf("group %s has offsets %v on %s on the original source: the failback did not strip the prefix from its checkpoints", g, o, renamed)
		}
	}
}

// TestFailbackWarnsOfARenameNotReversed: the forward mirror renamed orders to
// dc1.orders and the failback mirror keeps the name: the records would flow back into
// dc1.orders, not orders. The engine says so once per topic, naming both and the field.
func TestFailbackWarnsOfARenameNotReversed(t *testing.T) {
	const partitions = 2
	c := newClusters(t, partitions, kfake.ClusterID("cluster-b"))
	cfg := c.testConfig(t, func(cfg *config.Config) {
		cfg.Topics.Rename = &config.Rename{Prefix: "dc1."}
	})
	newWorkload(partitions).produce(t, c.source, 10)
	if _, err := Failover(context.Background(), cfg, FailoverOptions{Mode: FailoverPlanned, Timeout: time.Minute}, failoverOpts(t)...); err != nil {
		t.Fatalf("planned failover failed: %v", err)
	}
	rcfg := reverseConfig(t, c, func(cfg *config.Config) { cfg.Topics.Include = []string{`dc1\..*`} })
	lines, log := newLogLines(t)
	r := startEngine(t, rcfg, log)
	waitFor(t, 30*time.Second, "the failback points read", func() bool { return lines.count("Read the failback points") == 1 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if n := lines.count("Warning: failing back into another topic than the failover mirrored from", `"topic"="dc1.orders"`, `"targetTopic"="dc1.orders"`, `"failedOverFrom"="orders"`, "topics.rename"); n != 1 {
		t.Fatalf("%d warnings of the rename not reversed, want 1", n)
	}
}
