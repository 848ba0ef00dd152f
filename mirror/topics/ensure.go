package topics

import (
	"errors"
	"fmt"

	"github.com/IBM/sarama"
)

// maxInternalReplicationFactor is the replication factor EnsureTopic gives an internal
// topic when none is asked for, on a cluster with at least that many brokers: Kafka's
// own internal topics use 3.
const maxInternalReplicationFactor = 3

// TopicSpec is what EnsureTopic makes sure of.
type TopicSpec struct {
	// Partitions is the partition count of a created topic. An existing topic keeps
	// its count: for a keyed internal topic, adding partitions would move keys.
	Partitions int32
	// ReplicationFactor of a created topic; 0 or less means the cluster's broker count,
	// capped at 3.
	ReplicationFactor int16
	// Configs are set on a created topic, and set again on an existing one whose values
	// differ (cleanup.policy=compact for a topic of latest values, for example).
	Configs map[string]string
}

// EnsureTopic makes sure a topic the mirror itself writes to (an internal topic such as
// an offset-sync topic) exists with spec's configs: it creates a missing topic, and on
// an existing one sets the configs whose values differ. It reports whether it created
// the topic. Unlike Syncer, a config the cluster refuses is an error: the caller's
// records depend on these configs.
func EnsureTopic(admin sarama.ClusterAdmin, topic string, spec TopicSpec) (bool, error) {
	rf := spec.ReplicationFactor
	if rf <= 0 {
		brokers, _, err := admin.DescribeCluster()
		if err != nil {
			return false, fmt.Errorf("while counting brokers for topic %q: %w", topic, err)
		}
		rf = int16(min(len(brokers), maxInternalReplicationFactor))
	}
	detail := &sarama.TopicDetail{NumPartitions: spec.Partitions, ReplicationFactor: rf}
	if len(spec.Configs) > 0 {
		detail.ConfigEntries = make(map[string]*string, len(spec.Configs))
		for k, v := range spec.Configs {
			detail.ConfigEntries[k] = &v
		}
	}
	err := admin.CreateTopic(topic, detail, false)
	switch {
	case err == nil:
		return true, nil
	case !errors.Is(err, sarama.ErrTopicAlreadyExists):
		return false, fmt.Errorf("while creating topic %q with %d partitions, replication factor %d and configs %v: %w",
			topic, spec.Partitions, rf, sortedKeys(spec.Configs), err)
	case len(spec.Configs) == 0:
		return false, nil
	}
	current, err := describeConfigs(admin, []string{topic}, &ConfigFilter{})
	if err == nil {
		err = current[topic].err
	}
	if err != nil {
		return false, fmt.Errorf("while describing configs of topic %q: %w", topic, err)
	}
	changes := configChanges(topicConfigs{explicit: spec.Configs}, current[topic])
	if len(changes) == 0 {
		return false, nil
	}
	entries := make(map[string]sarama.IncrementalAlterConfigsEntry, len(changes))
	for k, v := range changes {
		entries[k] = sarama.IncrementalAlterConfigsEntry{Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &v}
	}
	if err := admin.IncrementalAlterConfig(sarama.TopicResource, topic, entries, false); err != nil {
		return false, fmt.Errorf("while setting configs %v of topic %q: %w", sortedKeys(changes), topic, err)
	}
	return false, nil
}
