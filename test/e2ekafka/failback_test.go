//go:build kafka

package e2ekafka

import (
	"context"
	"testing"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/e2eharness"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/realkafka"
	"github.com/twmb/franz-go/pkg/kadm"
)

// TestDeclaredFailoverAndFailbackOnRealKafka is test/e2e's TestDeclaredFailback on real
// brokers: `kafka-mirror run` mirrors a workload and stops; `kafka-mirror failover
// --mode planned` cuts over and moves two groups; records are written to the target and
// the groups read on there (app-a everything, app-b one partition past the failback
// point and one not even up to it); then `kafka-mirror failback --from <group>` (with
// provenance) mirrors back. Both clusters hold every record of both phases exactly once:
// the source got exactly the records written to the target after the cutover and none
// of the originally mirrored ones again; both groups, moved back by the failback
// mirror's checkpoints, skip nothing and read nothing again on the source.
func TestDeclaredFailoverAndFailbackOnRealKafka(t *testing.T) {
	const topic = "e2e.failback"
	// Real clusters have distinct random cluster ids: the failback mirror's
	// provenance tells them apart.
	s := newScenario(t, world{}, map[string]int32{topic: 2})
	side := func(onTarget bool) *realkafka.Cluster {
		if onTarget {
			return s.dst
		}
		return s.src
	}
	rep, figures := e2eharness.DeclaredFailback(t, e2eharness.FailbackWorld{
		Topic: topic, Partitions: 2, Source: s.src.Addrs(), Target: s.dst.Addrs(), Group: s.group, Dir: s.dir,
		Config: s.config,
		Commit: func(onTarget bool, group string, offs map[int32]int64) {
			t.Helper()
			o := kadm.Offsets{}
			for p, at := range offs {
				o.Add(kadm.Offset{Topic: topic, Partition: p, At: at, LeaderEpoch: -1})
			}
			if err := retry(func(ctx context.Context) error { return commitOffsets(ctx, side(onTarget), group, o) }); err != nil {
				t.Fatalf("committing %s on %s: %v", group, side(onTarget).Name(), err)
			}
		},
		Committed: func(onTarget bool, group string) map[int32]int64 {
			return committed(t, side(onTarget), group)[topic]
		},
		CompleteTimeout: completeTimeout,
	}, 1000, 300)
	s.figures(rep, figures)
}
