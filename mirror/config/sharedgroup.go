package config

// SharedGroup tells whether two mirrors would share one consumer group on a cluster:
// "source" when both read their source cluster as the same group, "target" when both
// write their target cluster under it (the target-side progress group
// <group>.source-offsets, the offset-sync topic and the exactly-once transactional ids
// all derive from the group), "" when neither. Such mirrors would split partitions and
// commit, or record progress, for each other. The operator refuses the later of two
// KafkaMirrors that share a group, and `kafka-mirror validate` the later of two
// manifests.
func SharedGroup(a, b *Config) string {
	switch {
	case a.ConsumerGroup != b.ConsumerGroup:
		return ""
	case a.Source.SameClusterAs(b.Source):
		return "source"
	case a.Target.SameClusterAs(b.Target):
		return "target"
	}
	return ""
}
