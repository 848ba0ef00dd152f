package mirror

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// TestCommitIsConfirmedAcrossACoordinatorBlip makes the source's group coordinator
// refuse offset commits with a retriable error for about a second while records flow,
// then lets it answer again, waits through an idle period and stops the engine. The
// group must hold every mirrored offset, the engine's committed gauge must equal the
// group's, and a restarted engine must mirror nothing twice.
func TestCommitIsConfirmedAcrossACoordinatorBlip(t *testing.T) {
	tests := map[string]*kerr.Error{
		"not coordinator":              kerr.NotCoordinator,
		"coordinator load in progress": kerr.CoordinatorLoadInProgress,
		"coordinator not available":    kerr.CoordinatorNotAvailable,
	}
	for name, code := range tests {
		t.Run(name, func(t *testing.T) {
			const (
				partitions = 2
				perBatch   = 100
				blip       = time.Second
			)
			c := newClusters(t, partitions)
			w := newWorkload(partitions)
			w.produce(t, c.source, perBatch)
			cfg := c.testConfig(t, func(cfg *config.Config) { cfg.Streams = 1 })
			r := startEngine(t, cfg, testLogger(t))
			testutil.WaitFor(t, 20*time.Second, "the first records committed", func() bool { return allCommitted(r.e.Stats(), partitions, perBatch) })
			commitsBefore := r.e.Stats().Commits

			fault := c.source.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetCommit}, Group: cfg.ConsumerGroup, Err: code, Count: -1})
			w.produce(t, c.source, perBatch)
			testutil.WaitFor(t, 20*time.Second, "the second records acked by the target", func() bool { return r.e.Stats().Records == 2*partitions*perBatch })
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := fault.Wait(ctx, 1); err != nil {
				t.Fatalf("no offset commit reached the coordinator during the blip: %v", err)
			}
			cancel()
			time.Sleep(blip)
			if s := r.e.Stats(); s.Partitions[0].Committed != perBatch || s.Partitions[1].Committed != perBatch || s.Commits != commitsBefore {
				t.Errorf("during the blip the engine reports committed %d/%d and %d commits, want %d/%d and %d: nothing was confirmed",
					s.Partitions[0].Committed, s.Partitions[1].Committed, s.Commits, perBatch, perBatch, commitsBefore)
			}
			hits := fault.Hits()
			fault.Remove()

			// Idle: no commit point moves from here on.
			time.Sleep(5 * cfg.OffsetCommitInterval.Duration)
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
			committed := testutil.CommittedOffsets(t, c.source.ListenAddrs(), cfg.ConsumerGroup, testTopic, partitions)
			stats := r.e.Stats()
			t.Logf("%d commits refused during the blip; after the stop the group holds %v, the engine reports %d/%d",
				hits, committed, stats.Partitions[0].Committed, stats.Partitions[1].Committed)
			for p := int32(0); p < partitions; p++ {
				if committed[p] != 2*perBatch {
					t.Errorf("partition %d: the group committed %d, want %d", p, committed[p], 2*perBatch)
				}
				if got := stats.Partitions[p].Committed; got != committed[p] {
					t.Errorf("partition %d: the engine reports committed %d, the group holds %d", p, got, committed[p])
				}
			}
			if t.Failed() {
				return
			}

			r2 := startEngine(t, cfg, testLogger(t))
			testutil.WaitFor(t, 20*time.Second, "the restarted engine ready", func() bool { return r2.e.Ready() == nil })
			time.Sleep(5 * cfg.OffsetCommitInterval.Duration)
			if err := r2.stop(t); err != nil {
				t.Fatal(err)
			}
			res := audit(t, w, readTarget(t, c.target, testTopic, w.total(), time.Second, 20*time.Second), true, true)
			if res.missing != 0 || res.duplicates != 0 {
				t.Fatalf("after the restart: %d lost, %d duplicates; want 0 and 0", res.missing, res.duplicates)
			}
			if n := r2.e.Stats().Records; n != 0 {
				t.Fatalf("the restarted engine mirrored %d records, want 0", n)
			}
		})
	}
}

func allCommitted(s Stats, partitions int, want int64) bool {
	if len(s.Partitions) != partitions {
		return false
	}
	for _, p := range s.Partitions {
		if p.Committed != want {
			return false
		}
	}
	return true
}
