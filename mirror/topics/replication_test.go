package topics

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/IBM/sarama"
	"github.com/go-logr/logr/testr"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// TestSyncReplicationFactor creates target topics from a 3-broker source whose topics
// have replication factors 3 and 2: the targets get the source's factor, capped at the
// target's broker count, unless topics.replicationFactor sets one.
func TestSyncReplicationFactor(t *testing.T) {
	tests := map[string]struct {
		targetBrokers int
		override      int32 // topics.replicationFactor; 0 is unset
		want          map[string]int16
		wantFailed    string // a topic the target refuses, with this in its error
	}{
		"copied from the source":         {targetBrokers: 3, want: map[string]int16{"rf3": 3, "rf2": 2}},
		"capped at the target's brokers": {targetBrokers: 2, want: map[string]int16{"rf3": 2, "rf2": 2}},
		"capped at a single broker":      {targetBrokers: 1, want: map[string]int16{"rf3": 1, "rf2": 1}},
		"-1 is the source's too":         {targetBrokers: 3, override: -1, want: map[string]int16{"rf3": 3, "rf2": 2}},
		"override":                       {targetBrokers: 3, override: 1, want: map[string]int16{"rf3": 1, "rf2": 1}},
		"override used as it is, not capped": {
			targetBrokers: 1, override: 2, want: map[string]int16{},
			wantFailed: "replication factor 2",
		},
	}
	source := newCluster(t, kfake.NumBrokers(3))
	src := newAdmin(t, source)
	createTopicRF(t, src, "rf3", 2, 3)
	createTopicRF(t, src, "rf2", 2, 2)
	if got := replicationFactors(t, src); got["rf3"] != 3 || got["rf2"] != 2 {
		t.Fatalf("source replication factors = %v, want rf3:3 rf2:2", got)
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tgt := newAdmin(t, newCluster(t, kfake.NumBrokers(tc.targetBrokers)))
			cfg := &config.Config{Topics: config.Topics{Include: []string{"rf.*"}, ReplicationFactor: tc.override}}
			cfg.Default()
			opts, err := OptionsFor(cfg)
			if err != nil {
				t.Fatalf("OptionsFor: %v", err)
			}
			opts.Logger = testr.New(t)
			sel, _ := NewSelector(cfg.Topics)
			rep, err := NewSyncer(src, tgt, sel, opts).Sync(context.Background())
			if err != nil {
				t.Fatalf("Sync: %v", err)
			}
			got := replicationFactors(t, tgt)
			for _, st := range rep.Topics {
				switch {
				case tc.wantFailed != "":
					if st.Action != ActionFailed || !errors.Is(st.Err, sarama.ErrInvalidReplicationFactor) || !strings.Contains(st.Err.Error(), tc.wantFailed) {
						t.Errorf("%s: action %s, err %v; want Failed with an invalid replication factor %q", st.Source, st.Action, st.Err, tc.wantFailed)
					}
				case st.Action != ActionCreated || st.ReplicationFactor != tc.want[st.Source]:
					t.Errorf("%s: action %s with replication factor %d, want Created with %d", st.Source, st.Action, st.ReplicationFactor, tc.want[st.Source])
				}
			}
			for topic, rf := range tc.want {
				if got[topic] != rf {
					t.Errorf("target %s has replication factor %d, want %d", topic, got[topic], rf)
				}
			}
			if len(tc.want) == 0 && len(got) != 0 {
				t.Errorf("target topics = %v, want none", got)
			}
		})
	}
}

func createTopicRF(t *testing.T, a sarama.ClusterAdmin, name string, partitions int32, rf int16) {
	t.Helper()
	if err := a.CreateTopic(name, &sarama.TopicDetail{NumPartitions: partitions, ReplicationFactor: rf}, false); err != nil {
		t.Fatalf("creating topic %q: %v", name, err)
	}
}

// replicationFactors returns each user topic's replication factor as its metadata
// tells it (the replicas of its first partition).
func replicationFactors(t *testing.T, a sarama.ClusterAdmin) map[string]int16 {
	t.Helper()
	md, err := a.DescribeTopics(nil)
	if err != nil {
		t.Fatalf("describing topics: %v", err)
	}
	out := map[string]int16{}
	for _, tm := range md {
		if strings.HasPrefix(tm.Name, "__") || len(tm.Partitions) == 0 {
			continue
		}
		out[tm.Name] = int16(len(tm.Partitions[0].Replicas))
	}
	return out
}

// TestSyncReplicationFactorUncountedBrokers: a target that will not say how many
// brokers it has (DescribeCluster refused) still gets its topic, with the target's
// default replication factor (3 on this 3-broker kfake, where the source's is 2).
func TestSyncReplicationFactorUncountedBrokers(t *testing.T) {
	src := newAdmin(t, newCluster(t, kfake.NumBrokers(3)))
	createTopicRF(t, src, "rf2", 1, 2)
	tgtCluster := newCluster(t, kfake.NumBrokers(3))
	h := tgtCluster.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.DescribeCluster}, Err: kerr.ClusterAuthorizationFailed, TopLevel: true, Count: -1})
	tgt := newAdmin(t, tgtCluster)
	sel, _ := NewSelector(config.Topics{Include: []string{".*"}})
	rep, err := NewSyncer(src, tgt, sel, SyncOptions{Logger: testr.New(t)}).Sync(context.Background())
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if st := rep.Topics[0]; st.Action != ActionCreated || st.ReplicationFactor != -1 {
		t.Errorf("rf2: action %s with replication factor %d, want Created with -1 (the target's default)", st.Action, st.ReplicationFactor)
	}
	if got := replicationFactors(t, tgt)["rf2"]; got != 3 {
		t.Errorf("target rf2 replication factor = %d, want the target default 3", got)
	}
	if h.Hits() == 0 {
		t.Error("DescribeCluster was not refused; the test did not test the fallback")
	}
}
