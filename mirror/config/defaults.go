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
	DefaultDelivery                = DeliveryAtLeastOnce
	DefaultTransactionInterval     = 100 * time.Millisecond
)

// Default fills every unset field with its default value. It is idempotent and leaves
// set fields alone, so a defaulted config renders back to the same file.
func (c *Config) Default() {
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
	for i := range c.Handlers {
		if h := c.Handlers[i].CEL; h != nil && h.OnError == "" {
			h.OnError = OnErrorFail
		}
	}
}
