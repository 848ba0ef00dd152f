package topics

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/IBM/sarama"
	"github.com/go-logr/logr/testr"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// What kfake (the in-process broker these tests use) does with topic configs, read from
// its source at the version in go.mod, so that the tests ask only what it can answer:
//   - CreateTopics stores every config it is given, known or not, without checking
//     names or values (Kafka refuses an unknown name with INVALID_CONFIG), so a refusing
//     target is simulated with kfake.Fault (refuseConfig).
//   - DescribeConfigs returns its defaults for the topic configs it knows (cleanup.policy,
//     retention.*, segment.*, max.message.bytes, min.insync.replicas,
//     message.timestamp.type, ...) as DEFAULT_CONFIG and every config set on the topic
//     as DYNAMIC_TOPIC_CONFIG (sarama's SourceTopic), which is what the Syncer copies.
//   - IncrementalAlterConfigs (SET, DELETE, APPEND, SUBTRACT) and AlterConfigs both work
//     on topics, again without checking names or values; the Syncer uses the former.
//   - A replication factor above the broker count is refused with
//     INVALID_REPLICATION_FACTOR; -1 means min(3, brokers); metadata reports as many
//     replicas per partition as the topic's factor (at most the broker count).

func TestConfigFilter(t *testing.T) {
	tests := map[string]struct {
		exclude          []string
		copied, excluded []string
	}{
		"defaults": {
			exclude: config.DefaultTopicConfigExclude,
			copied: []string{"cleanup.policy", "retention.ms", "retention.bytes", "max.message.bytes", "compression.type",
				"min.compaction.lag.ms", "segment.bytes", "confluent.placement.constraints"},
			excluded: []string{"min.insync.replicas", "unclean.leader.election.enable",
				"leader.replication.throttled.replicas", "follower.replication.throttled.replicas",
				"message.timestamp.type", "message.timestamp.difference.max.ms", "message.timestamp.before.max.ms",
				"message.timestamp.after.max.ms", "remote.storage.enable", "local.retention.ms", "local.retention.bytes",
				"remote.log.copy.disable", "message.format.version", "message.downconversion.enable"},
		},
		"a set list replaces the defaults": {
			exclude:  []string{`retention\..*`},
			copied:   []string{"min.insync.replicas", "cleanup.policy", "message.timestamp.type"},
			excluded: []string{"retention.ms", "retention.bytes"},
		},
		"patterns match whole names": {
			exclude:  []string{`retention`, `segment\.(ms|bytes)`},
			copied:   []string{"retention.ms", "delete.retention.ms", "segment.index.bytes"},
			excluded: []string{"segment.ms", "segment.bytes"},
		},
		"an empty pattern copies everything": {
			exclude: []string{""},
			copied:  []string{"min.insync.replicas", "message.timestamp.type", "unclean.leader.election.enable"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f, err := NewConfigFilter(tc.exclude)
			if err != nil {
				t.Fatalf("NewConfigFilter: %v", err)
			}
			for _, n := range tc.copied {
				if !f.Copies(n) {
					t.Errorf("Copies(%q) = false, want true", n)
				}
			}
			for _, n := range tc.excluded {
				if f.Copies(n) {
					t.Errorf("Copies(%q) = true, want false", n)
				}
			}
		})
	}
	if _, err := NewConfigFilter([]string{"ok", "bad("}); err == nil || !strings.Contains(err.Error(), "topics.configExclude[1]") {
		t.Errorf("NewConfigFilter(bad) error = %v, want one naming topics.configExclude[1]", err)
	}
}

// TestSyncCompactedTopicFidelity mirrors a compacted source topic with default
// options: its target is compacted with the same configs, the excluded ones keep the
// target's defaults, and a later change of a source config reaches the target on the
// next sync (IncrementalAlterConfigs), after which a sync changes nothing.
func TestSyncCompactedTopicFidelity(t *testing.T) {
	src, tgt := newAdmin(t, newCluster(t)), newAdmin(t, newCluster(t))
	sourceConfigs := map[string]string{
		"cleanup.policy":         "compact",
		"min.compaction.lag.ms":  "60000",
		"delete.retention.ms":    "3600000",
		"segment.bytes":          "1048576",
		"max.message.bytes":      "2097152",
		"compression.type":       "zstd",
		"min.insync.replicas":    "2",             // excluded by default
		"message.timestamp.type": "LogAppendTime", // excluded by default
	}
	createTopic(t, src, "users", 3, sourceConfigs)
	sel, _ := NewSelector(config.Topics{Include: []string{".*"}})
	cfg := &config.Config{Topics: config.Topics{Include: []string{".*"}}}
	cfg.Default()
	opts, err := OptionsFor(cfg)
	if err != nil {
		t.Fatalf("OptionsFor: %v", err)
	}
	if !opts.SyncConfigs {
		t.Fatal("OptionsFor(defaulted config).SyncConfigs = false, want configs synced by default")
	}
	opts.Logger = testr.New(t)
	s := NewSyncer(src, tgt, sel, opts)

	rep, err := s.Sync(context.Background())
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if got, want := keys(rep), []stateKey{{"users", "users", 3, 3, ActionCreated}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("states:\n got %+v\nwant %+v", got, want)
	}
	if rep.Topics[0].RefusedConfigs != nil {
		t.Errorf("RefusedConfigs = %v, want none", rep.Topics[0].RefusedConfigs)
	}
	want := map[string]string{}
	for k, v := range sourceConfigs {
		want[k] = v
	}
	want["min.insync.replicas"] = "1"             // the target's default
	want["message.timestamp.type"] = "CreateTime" // the target's default
	if got := targetConfigs(t, tgt, "users", want); !reflect.DeepEqual(got, want) {
		t.Errorf("target configs after create:\n got %v\nwant %v", got, want)
	}

	// The source changes: retention added, compaction lag changed, policy widened.
	changes := map[string]string{"cleanup.policy": "compact,delete", "retention.ms": "86400000", "min.compaction.lag.ms": "120000"}
	alterConfigs(t, src, "users", changes)
	for i, wantUpdated := range [][]string{{"cleanup.policy", "min.compaction.lag.ms", "retention.ms"}, nil} {
		rep, err := s.Sync(context.Background())
		if err != nil {
			t.Fatalf("Sync %d after the change: %v", i, err)
		}
		if got := rep.Topics[0].UpdatedConfigs; !reflect.DeepEqual(got, wantUpdated) {
			t.Errorf("Sync %d after the change: UpdatedConfigs = %q, want %q", i, got, wantUpdated)
		}
		if rep.Topics[0].Action != ActionNone || rep.ConfigsRefused != 0 {
			t.Errorf("Sync %d after the change: action %s, %d topics with refused configs; want InSync, 0", i, rep.Topics[0].Action, rep.ConfigsRefused)
		}
	}
	for k, v := range changes {
		want[k] = v
	}
	if got := targetConfigs(t, tgt, "users", want); !reflect.DeepEqual(got, want) {
		t.Errorf("target configs after the change:\n got %v\nwant %v", got, want)
	}
}

// TestSyncConfigExclude shows that a set topics.configExclude replaces the defaults:
// what it lists stays on the target's default, and what the defaults would have left
// out is copied.
func TestSyncConfigExclude(t *testing.T) {
	src, tgt := newAdmin(t, newCluster(t)), newAdmin(t, newCluster(t))
	createTopic(t, src, "a", 1, map[string]string{"retention.ms": "1000", "min.insync.replicas": "2", "cleanup.policy": "compact"})
	createTopic(t, src, "b", 1, nil)
	createTopic(t, tgt, "b", 1, nil)
	sel, _ := NewSelector(config.Topics{Include: []string{".*"}})
	cfg := &config.Config{Topics: config.Topics{Include: []string{".*"}, ConfigExclude: []string{`retention\..*`}}}
	cfg.Default()
	opts, err := OptionsFor(cfg)
	if err != nil {
		t.Fatalf("OptionsFor: %v", err)
	}
	s := NewSyncer(src, tgt, sel, opts)
	if _, err := s.Sync(context.Background()); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	// A later source config of an existing target follows the same filter.
	alterConfigs(t, src, "b", map[string]string{"retention.ms": "5000", "segment.ms": "600000"})
	rep, err := s.Sync(context.Background())
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if got := rep.Topics[1].UpdatedConfigs; !reflect.DeepEqual(got, []string{"segment.ms"}) {
		t.Errorf("b UpdatedConfigs = %q, want [segment.ms]", got)
	}
	for _, w := range []struct{ topic, name, value string }{
		{"a", "retention.ms", "604800000"}, // excluded: the target's default
		{"a", "min.insync.replicas", "2"},  // not excluded any more: copied
		{"a", "cleanup.policy", "compact"},
		{"b", "retention.ms", "604800000"},
		{"b", "segment.ms", "600000"},
	} {
		if got := topicConfig(t, tgt, w.topic, w.name); got != w.value {
			t.Errorf("target %s %s = %q, want %q", w.topic, w.name, got, w.value)
		}
	}
}

// refuseConfig makes the cluster refuse, as a broker that does not know a config
// does, every CreateTopics and IncrementalAlterConfigs that sets name. It returns the
// handle counting the refusals.
func refuseConfig(c *kfake.Cluster, name string) *kfake.FaultHandle {
	return c.Fault(kfake.Fault{
		Keys:  []kmsg.Key{kmsg.CreateTopics, kmsg.IncrementalAlterConfigs},
		Err:   kerr.InvalidConfig,
		Count: -1,
		When: func(req kmsg.Request) bool {
			switch r := req.(type) {
			case *kmsg.CreateTopicsRequest:
				for _, t := range r.Topics {
					for _, c := range t.Configs {
						if c.Name == name {
							return true
						}
					}
				}
			case *kmsg.IncrementalAlterConfigsRequest:
				for _, res := range r.Resources {
					for _, c := range res.Configs {
						if c.Name == name {
							return true
						}
					}
				}
			}
			return false
		},
	})
}

// TestSyncRefusedConfigs has a target that refuses one config the source sets: the
// new topic is still created with every other config, an existing topic still gets
// the other changes, and the refused config is reported for both, with the cause.
func TestSyncRefusedConfigs(t *testing.T) {
	const refused = "confluent.placement.constraints"
	srcCluster, tgtCluster := newCluster(t), newCluster(t)
	src, tgt := newAdmin(t, srcCluster), newAdmin(t, tgtCluster)
	createTopic(t, src, "new", 2, map[string]string{"cleanup.policy": "compact", "retention.ms": "1000", refused: "{}"})
	createTopic(t, src, "existing", 1, map[string]string{"segment.ms": "600000", refused: "{}"})
	createTopic(t, tgt, "existing", 1, nil)
	h := refuseConfig(tgtCluster, refused)
	sel, _ := NewSelector(config.Topics{Include: []string{".*"}})
	s := NewSyncer(src, tgt, sel, SyncOptions{SyncConfigs: true, Logger: testr.New(t)})

	for i := range 2 { // refused configs are tried again, and reported again, every sync
		rep, err := s.Sync(context.Background())
		if err != nil {
			t.Fatalf("Sync %d: %v", i, err)
		}
		wantAction := map[int]string{0: ActionCreated, 1: ActionNone}[i]
		if got, want := keys(rep), []stateKey{{"existing", "existing", 1, 1, ActionNone}, {"new", "new", 2, 2, wantAction}}; !reflect.DeepEqual(got, want) {
			t.Fatalf("Sync %d states:\n got %+v\nwant %+v", i, got, want)
		}
		if rep.Failed != 0 || rep.ConfigsRefused != 2 {
			t.Errorf("Sync %d: Failed = %d, ConfigsRefused = %d; want 0 and 2", i, rep.Failed, rep.ConfigsRefused)
		}
		for _, st := range rep.Topics {
			if len(st.RefusedConfigs) != 1 || st.RefusedConfigs[0].Name != refused || st.RefusedConfigs[0].Value != "{}" ||
				!errors.Is(st.RefusedConfigs[0].Err, sarama.ErrInvalidConfig) {
				t.Errorf("Sync %d: %s RefusedConfigs = %v, want %s={} refused with INVALID_CONFIG", i, st.Source, st.RefusedConfigs, refused)
			}
		}
		wantUpdated := map[int][]string{0: {"segment.ms"}, 1: nil}[i]
		if got := rep.Topics[0].UpdatedConfigs; !reflect.DeepEqual(got, wantUpdated) {
			t.Errorf("Sync %d: existing UpdatedConfigs = %q, want %q", i, got, wantUpdated)
		}
	}
	for _, w := range []struct{ topic, name, value string }{
		{"new", "cleanup.policy", "compact"},
		{"new", "retention.ms", "1000"},
		{"new", refused, ""},
		{"existing", "segment.ms", "600000"},
		{"existing", refused, ""},
	} {
		if got := topicConfig(t, tgt, w.topic, w.name); got != w.value {
			t.Errorf("target %s %s = %q, want %q", w.topic, w.name, got, w.value)
		}
	}
	if h.Hits() == 0 {
		t.Error("the target refused nothing; the test did not test refusals")
	}
}

// targetConfigs returns the values of the named configs of a topic.
func targetConfigs(t *testing.T, a sarama.ClusterAdmin, topic string, names map[string]string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for n := range names {
		out[n] = topicConfig(t, a, topic, n)
	}
	return out
}

func alterConfigs(t *testing.T, a sarama.ClusterAdmin, topic string, configs map[string]string) {
	t.Helper()
	entries := map[string]sarama.IncrementalAlterConfigsEntry{}
	for k, v := range configs {
		entries[k] = sarama.IncrementalAlterConfigsEntry{Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &v}
	}
	if err := a.IncrementalAlterConfig(sarama.TopicResource, topic, entries, false); err != nil {
		t.Fatalf("altering configs of %q: %v", topic, err)
	}
}

// TestSyncConfigsUnreadable has a source that may not describe one topic's configs (no
// DescribeConfigs ACL): with config sync on by default, that must not stop the
// mirror, so the target is still created with the source's partitions, and ConfigErr
// says why its configs are not copied. Once the source answers, the next sync copies
// them.
func TestSyncConfigsUnreadable(t *testing.T) {
	srcCluster := newCluster(t)
	src, tgt := newAdmin(t, srcCluster), newAdmin(t, newCluster(t))
	createTopic(t, src, "secret", 2, map[string]string{"cleanup.policy": "compact"})
	createTopic(t, src, "open", 1, map[string]string{"retention.ms": "1000"})
	h := srcCluster.Fault(kfake.Fault{
		Keys: []kmsg.Key{kmsg.DescribeConfigs}, Resource: "secret", Err: kerr.TopicAuthorizationFailed, Count: -1,
	})
	sel, _ := NewSelector(config.Topics{Include: []string{".*"}})
	s := NewSyncer(src, tgt, sel, SyncOptions{SyncConfigs: true, Logger: testr.New(t)})

	rep, err := s.Sync(context.Background())
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	if got, want := keys(rep), []stateKey{{"open", "open", 1, 1, ActionCreated}, {"secret", "secret", 2, 2, ActionCreated}}; !reflect.DeepEqual(got, want) {
		t.Fatalf("states:\n got %+v\nwant %+v", got, want)
	}
	if err := rep.Topics[1].ConfigErr; !errors.Is(err, sarama.ErrTopicAuthorizationFailed) ||
		!strings.Contains(err.Error(), `while describing configs of source topic "secret"`) {
		t.Errorf("secret: ConfigErr = %v, want the source's authorization error, naming the topic", err)
	}
	if rep.Failed != 0 || rep.ConfigsFailed != 1 || rep.Topics[0].ConfigErr != nil {
		t.Errorf("Failed = %d, ConfigsFailed = %d, open ConfigErr = %v; want 0, 1, nil", rep.Failed, rep.ConfigsFailed, rep.Topics[0].ConfigErr)
	}
	if got := topicConfig(t, tgt, "secret", "cleanup.policy"); got != "delete" {
		t.Errorf("target secret cleanup.policy = %q before the source answers, want the default delete", got)
	}
	if got := topicConfig(t, tgt, "open", "retention.ms"); got != "1000" {
		t.Errorf("target open retention.ms = %q, want 1000", got)
	}
	if h.Hits() == 0 {
		t.Fatal("the source refused nothing; the test did not test an unreadable topic")
	}

	h.Remove()
	rep, err = s.Sync(context.Background())
	if err != nil {
		t.Fatalf("Sync after the ACL is fixed: %v", err)
	}
	if got := rep.Topics[1].UpdatedConfigs; !reflect.DeepEqual(got, []string{"cleanup.policy"}) || rep.ConfigsFailed != 0 {
		t.Errorf("after the fix: secret UpdatedConfigs = %q, ConfigsFailed = %d; want [cleanup.policy], 0", got, rep.ConfigsFailed)
	}
	if got := topicConfig(t, tgt, "secret", "cleanup.policy"); got != "compact" {
		t.Errorf("target secret cleanup.policy = %q after the fix, want compact", got)
	}
}

// TestSyncCreateRefusedForAnotherReason: a target that refuses the topic itself (a
// create policy on its name) fails the topic with the cause, and does not blame its
// configs, though each of them was refused along with the topic while they were tried.
func TestSyncCreateRefusedForAnotherReason(t *testing.T) {
	tgtCluster := newCluster(t)
	src, tgt := newAdmin(t, newCluster(t)), newAdmin(t, tgtCluster)
	createTopic(t, src, "bad", 1, map[string]string{"cleanup.policy": "compact", "retention.ms": "1000"})
	rejectCreates(tgtCluster, "bad")
	sel, _ := NewSelector(config.Topics{Include: []string{".*"}})
	rep, err := NewSyncer(src, tgt, sel, SyncOptions{SyncConfigs: true, Logger: testr.New(t)}).Sync(context.Background())
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	st := rep.Topics[0]
	if st.Action != ActionFailed || !errors.Is(st.Err, sarama.ErrPolicyViolation) || st.RefusedConfigs != nil || rep.ConfigsRefused != 0 {
		t.Errorf("bad: action %s, err %v, refused configs %v; want Failed with the policy violation and no refused configs", st.Action, st.Err, st.RefusedConfigs)
	}
}
