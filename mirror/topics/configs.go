package topics

import (
	"fmt"
	"sort"

	"github.com/IBM/sarama"
)

// syncedConfigs is the allow-list of topic configs copied from a source topic to its
// target when SyncOptions.SyncConfigs is on. They describe the data (how long it is
// kept, whether it is compacted, how large a record may be), so the copy behaves like
// the original.
//
// Deliberately left out:
//   - replication and durability settings (min.insync.replicas,
//     unclean.leader.election.enable, *.replication.throttled.replicas): they depend on
//     the target cluster's size and the operator's own policy;
//   - broker- or storage-specific settings (remote.storage.enable, local.retention.*,
//     preallocate, index.*, flush.*, segment.jitter.ms, message.format.version,
//     message.downconversion.enable);
//   - message.timestamp.type: LogAppendTime on the target would overwrite the source
//     timestamps the mirror promises to keep;
//   - message.timestamp.before.max.ms / after.max.ms / difference.max.ms: a target
//     bound on timestamp age would reject a backlog of old records being mirrored.
var syncedConfigs = map[string]bool{
	"cleanup.policy":            true,
	"compression.type":          true,
	"delete.retention.ms":       true,
	"max.compaction.lag.ms":     true,
	"max.message.bytes":         true,
	"min.cleanable.dirty.ratio": true,
	"min.compaction.lag.ms":     true,
	"retention.bytes":           true,
	"retention.ms":              true,
	"segment.bytes":             true,
	"segment.ms":                true,
}

// SyncedTopicConfigs returns, sorted, the names of the topic configs that the Syncer
// copies when SyncOptions.SyncConfigs is on. Only configs set explicitly on the source
// topic are copied; cluster-wide defaults of the source are not.
func SyncedTopicConfigs() []string {
	names := make([]string, 0, len(syncedConfigs))
	for n := range syncedConfigs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// topicConfigs is the result of describing the configs of one topic.
type topicConfigs struct {
	// values holds every returned config by name (defaults included).
	values map[string]string
	// explicit holds the allow-listed configs set on the topic itself.
	explicit map[string]string
	err      error
}

// describeConfigs describes the allow-listed configs of topics in one request. A
// request-level failure is returned as the error; a failure for one topic is kept in
// that topic's entry so the others go on.
func describeConfigs(admin sarama.ClusterAdmin, topics []string) (map[string]topicConfigs, error) {
	out := make(map[string]topicConfigs, len(topics))
	if len(topics) == 0 {
		return out, nil
	}
	names := SyncedTopicConfigs()
	resources := make([]*sarama.ConfigResource, 0, len(topics))
	for _, t := range topics {
		resources = append(resources, &sarama.ConfigResource{Type: sarama.TopicResource, Name: t, ConfigNames: names})
	}
	results, err := admin.DescribeConfigs(resources, sarama.DescribeConfigsOptions{})
	if err != nil {
		return nil, err
	}
	for _, r := range results {
		tc := topicConfigs{values: map[string]string{}, explicit: map[string]string{}}
		if r.ErrorCode != sarama.ErrNoError {
			tc.err = describeError(r)
			out[r.Name] = tc
			continue
		}
		for _, e := range r.Configs {
			if !syncedConfigs[e.Name] || e.Sensitive {
				continue
			}
			tc.values[e.Name] = e.Value
			if e.Source == sarama.SourceTopic {
				tc.explicit[e.Name] = e.Value
			}
		}
		out[r.Name] = tc
	}
	for _, t := range topics {
		if _, ok := out[t]; !ok {
			out[t] = topicConfigs{err: sarama.ErrIncompleteResponse}
		}
	}
	return out, nil
}

func describeError(r *sarama.ConfigResourceResult) error {
	if r.ErrorMsg != "" {
		return fmt.Errorf("%w: %s", r.ErrorCode, r.ErrorMsg)
	}
	return r.ErrorCode
}

// configChanges returns the configs whose target value differs from the value set
// explicitly on the source. Target configs the source does not set are left alone: the
// target may have its own reasons for them.
func configChanges(source, target topicConfigs) map[string]string {
	changes := map[string]string{}
	for name, want := range source.explicit {
		if got, ok := target.values[name]; !ok || got != want {
			changes[name] = want
		}
	}
	return changes
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
