//go:build e2e

package e2e

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/audit"
)

// TestHarness checks the harness itself, without the engine: clients reach kfake only
// through the proxy (metadata advertises it), disabling the proxy makes the cluster
// unreachable, and the standard workload is written and read back whole.
func TestHarness(t *testing.T) {
	start := time.Now()
	src := newCluster(t, "source", 1)
	topics := stdTopics()
	src.createTopics(t, topics, nil)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	w := audit.Workload{Topics: topics, Records: stdRecords, NullFraction: stdNullFraction, Seed: 1}
	p, err := audit.Produce(ctx, src.addrs(), w, nil)
	if err != nil || len(p.Records) != stdRecords {
		t.Fatalf("produced %d of %d records through the proxy: %v", len(p.Records), stdRecords, err)
	}
	produceTime := p.Elapsed
	m, err := audit.ReadAll(ctx, src.addrs(), p.Topics(), audit.ReadOptions{})
	if err != nil {
		t.Fatalf("reading back: %v", err)
	}
	rep := audit.Audit(p, m, audit.Options{})
	if !rep.OK() || rep.Total.Mirrored != stdRecords || rep.Total.Duplicated != 0 {
		t.Fatalf("reading the source back:\n%s", rep)
	}

	src.disable()
	if c, err := net.DialTimeout("tcp", src.addrs()[0], time.Second); err == nil {
		c.Close()
		t.Fatal("the disabled proxy still accepts connections")
	}
	src.enable(t)
	got := src.endOffsets(t, topics)
	var total int64
	for _, ps := range got {
		for _, o := range ps {
			total += o
		}
	}
	if total != stdRecords {
		t.Fatalf("after re-enabling the proxy the source holds %d records, want %d", total, stdRecords)
	}
	t.Logf("FIGURES test=%s records=%d produce_seconds=%.1f read_seconds=%.1f", t.Name(), stdRecords,
		produceTime.Seconds(), time.Since(start).Seconds()-produceTime.Seconds())
}
