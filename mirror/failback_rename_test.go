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
