package config

import "time"

// Default values, in one place so that the engine, the operator and the docs agree.
const (
	DefaultClientID                = "kafka-mirror"
	DefaultPartitioning            = PartitioningPreserve
	DefaultInitialOffset           = InitialOffsetOldest
	DefaultStreams                 = 1
	DefaultOffsetCommitInterval    = 5 * time.Second
	DefaultDeliveryTimeout         = 2 * time.Minute
	DefaultTopicSyncInterval       = 30 * time.Second
	DefaultMaxInFlightPerPartition = 10000
	DefaultMetricsAddress          = ":8080"
	DefaultProvenanceHeader        = "kafka-mirror-provenance"
	DefaultProvenanceMaxHops       = 10
	DefaultDelivery                = DeliveryAtLeastOnce
	DefaultTransactionInterval     = 100 * time.Millisecond
	// DefaultProducers is producer.producers: batching producers sharing the target
	// partitions (docs/performance.md "Across regions").
	DefaultProducers = 8
	// MaxProducers bounds producer.producers: each is a client with its own
	// connection to every target broker.
	MaxProducers = 16
	// DefaultMaxInFlightRequests is producer.maxInFlightRequests: the engine's pipelined
	// idempotent producers, five batches per partition in flight as Kafka's Java
	// producer (docs/performance.md "A pipelined idempotent producer").
	DefaultMaxInFlightRequests = 5
	// MaxMaxInFlightRequests bounds producer.maxInFlightRequests: Kafka remembers the
	// last 5 batches of an idempotent producer per partition.
	MaxMaxInFlightRequests = 5
	// DefaultFlushFrequency is producer.flushFrequency when flushBytes or flushMessages
	// is set without it: sarama sends a batch below those thresholds only on the
	// frequency, so without one a partly filled batch waits for more records forever.
	// 5 ms is how long Kafka's own producer lingers by default (linger.ms, Kafka 4).
	DefaultFlushFrequency = 5 * time.Millisecond
)

// DefaultTopicConfigExclude is topics.configExclude when unset, in the spirit of
// MirrorMaker 2's DefaultConfigPropertyFilter: the topic configs that describe the
// target cluster (its size, its durability policy, its storage) or that would change
// the mirrored records, rather than the data. Each is a regular expression matching a
// whole config name.
var DefaultTopicConfigExclude = []string{
	// Durability and replication: they depend on the target's broker count and policy.
	`min\.insync\.replicas`,
	`unclean\.leader\.election\.enable`,
	`(leader|follower)\.replication\.throttled\.replicas`,
	// LogAppendTime would overwrite the source timestamps the mirror keeps, and a bound
	// on timestamp age would refuse a backlog of old records.
	`message\.timestamp\..*`,
	// Tiered storage needs the target's own remote storage; the message format settings
	// are gone from Kafka 4 brokers, which refuse them.
	`remote\.storage\.enable`,
	`remote\.log\..*`,
	`local\.retention\.(ms|bytes)`,
	`message\.format\.version`,
	`message\.downconversion\.enable`,
}

// Default fills every unset field with its default value. It is idempotent and leaves
// set fields alone, so a defaulted config renders back to the same file.
func (c *Config) Default() {
	// An empty handler list means no handler, as an absent one does; it is nil so that
	// the YAML written for it (which leaves an empty list out) reads back the same.
	if len(c.Handlers) == 0 {
		c.Handlers = nil
	}
	if c.APIVersion == "" {
		c.APIVersion = APIVersion
	}
	if c.Kind == "" {
		c.Kind = Kind
	}
	for _, cl := range []*Cluster{&c.Source, &c.Target} {
		if cl.ClientID == "" {
			cl.ClientID = DefaultClientID
		}
	}
	if c.InitialOffset == "" {
		c.InitialOffset = DefaultInitialOffset
	}
	if c.Partitioning == "" {
		c.Partitioning = DefaultPartitioning
	}
	if c.SyncTopics == nil {
		c.SyncTopics = BoolPtr(true)
	}
	if c.SyncTopicConfigs == nil {
		c.SyncTopicConfigs = BoolPtr(true)
	}
	if c.Topics.ConfigExclude == nil {
		c.Topics.ConfigExclude = append([]string(nil), DefaultTopicConfigExclude...)
	}
	if c.NoDataLoss == nil {
		c.NoDataLoss = BoolPtr(true)
	}
	if c.Streams == 0 {
		c.Streams = DefaultStreams
	}
	if c.OffsetCommitInterval.Duration == 0 {
		c.OffsetCommitInterval.Duration = DefaultOffsetCommitInterval
	}
	if c.DeliveryTimeout.Duration == 0 {
		c.DeliveryTimeout.Duration = DefaultDeliveryTimeout
	}
	if c.TopicSyncInterval.Duration == 0 {
		c.TopicSyncInterval.Duration = DefaultTopicSyncInterval
	}
	if c.MaxInFlightPerPartition == 0 {
		c.MaxInFlightPerPartition = DefaultMaxInFlightPerPartition
	}
	if c.Delivery == "" {
		c.Delivery = DefaultDelivery
	}
	if c.TransactionInterval.Duration == 0 {
		c.TransactionInterval.Duration = min(DefaultTransactionInterval, c.OffsetCommitInterval.Duration)
	}
	if c.Metrics.Address == "" {
		c.Metrics.Address = DefaultMetricsAddress
	}
	if p := c.Producer; p != nil && (p.FlushBytes > 0 || p.FlushMessages > 0) && p.FlushFrequency.Duration == 0 {
		p.FlushFrequency.Duration = DefaultFlushFrequency
	}
	c.defaultGroups()
	if p := c.Provenance; p != nil && p.Enabled {
		if p.Header == "" {
			p.Header = DefaultProvenanceHeader
		}
		if p.MaxHops == 0 {
			p.MaxHops = DefaultProvenanceMaxHops
		}
	}
	for i := range c.Handlers {
		if h := c.Handlers[i].CEL; h != nil && h.OnError == "" {
			h.OnError = OnErrorFail
		}
	}
}
