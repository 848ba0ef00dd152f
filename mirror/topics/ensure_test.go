package topics

import (
	"errors"
	"maps"
	"testing"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
)

// TestEnsureTopic creates an internal compacted topic, leaves it alone when it is as
// asked, and puts back a config someone changed; the replication factor follows the
// broker count, capped at 3.
func TestEnsureTopic(t *testing.T) {
	tests := map[string]struct {
		brokers int
		rf      int16
		wantRF  int16
	}{
		"one broker":            {brokers: 1, wantRF: 1},
		"four brokers, capped":  {brokers: 4, wantRF: 3},
		"asked for":             {brokers: 3, rf: 2, wantRF: 2},
		"two brokers, all used": {brokers: 2, wantRF: 2},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a := newAdmin(t, newCluster(t, kfake.NumBrokers(tc.brokers)))
			spec := TopicSpec{Partitions: 4, ReplicationFactor: tc.rf, Configs: map[string]string{"cleanup.policy": "compact", "retention.ms": "-1"}}
			for i, wantCreated := range []bool{true, false} {
				created, err := EnsureTopic(a, "mirror.offset-syncs", spec)
				if err != nil || created != wantCreated {
					t.Fatalf("EnsureTopic %d = %v, %v; want %v, nil", i, created, err, wantCreated)
				}
			}
			if got := userTopics(partitionCounts(t, a)); !maps.Equal(got, map[string]int32{"mirror.offset-syncs": 4}) {
				t.Errorf("topics = %v, want mirror.offset-syncs with 4 partitions", got)
			}
			if got := replicationFactors(t, a)["mirror.offset-syncs"]; got != tc.wantRF {
				t.Errorf("replication factor = %d, want %d", got, tc.wantRF)
			}
			alterConfigs(t, a, "mirror.offset-syncs", map[string]string{"cleanup.policy": "delete"})
			if created, err := EnsureTopic(a, "mirror.offset-syncs", spec); err != nil || created {
				t.Fatalf("EnsureTopic after a change = %v, %v; want false, nil", created, err)
			}
			for k, want := range spec.Configs {
				if got := topicConfig(t, a, "mirror.offset-syncs", k); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
		})
	}
	t.Run("too large a replication factor", func(t *testing.T) {
		a := newAdmin(t, newCluster(t))
		_, err := EnsureTopic(a, "x", TopicSpec{Partitions: 1, ReplicationFactor: 3})
		if !errors.Is(err, sarama.ErrInvalidReplicationFactor) {
			t.Fatalf("EnsureTopic with replication factor 3 on one broker: %v, want INVALID_REPLICATION_FACTOR", err)
		}
	})
}
