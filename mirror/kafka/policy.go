package kafka

import (
	"time"

	"github.com/IBM/sarama"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// Retry backoff of the producer: exponential from retryBackoffMin, capped at
// retryBackoffMax, so a broker restart is ridden out without a hot loop.
const (
	retryBackoffMin = 100 * time.Millisecond
	retryBackoffMax = time.Second
)

// ProducerConfig returns the configuration of the mirror's shared producer towards
// c.Target.
//
// With the no-data-loss policy (the default): acks=all, idempotent, one open request
// per broker (which keeps order across retries), and retries with exponential backoff
// for at least c.DeliveryTimeout before a send is reported as failed. With
// `noDataLoss: false`: leader acks only, no idempotence, five open requests and ten
// retries, which is faster but may lose or reorder records when a broker fails.
//
// Successes and errors are both returned: the engine acks source offsets from them.
func ProducerConfig(c *config.Config, opts ...Option) (*sarama.Config, error) {
	sc, err := NewConfig(c.Target, append([]Option{WithRole(RoleTarget)}, opts...)...)
	if err != nil {
		return nil, err
	}
	p := &sc.Producer
	p.Return.Successes = true
	p.Return.Errors = true
	p.Partitioner = Partitioner(c.Partitioning)
	// sarama's own channel size. A larger one (4096 was tried) lets one partition's
	// records run ahead through the shared broker input: its batch fills first,
	// brokerProducer.waitForSpace then holds every partition's records until that batch
	// is acked, and each request carries one full partition plus scraps. Harmless on
	// loopback, it halved the rate to a target 100 ms away (issue 28,
	// docs/performance.md "Across regions").
	sc.ChannelBufferSize = ProducerChannelBuffer
	p.Compression = compressionCodec(c.ProducerCompression())
	if t := c.Producer; t != nil {
		p.Flush.Frequency = t.FlushFrequency.Duration
		p.Flush.Bytes = t.FlushBytes
		p.Flush.Messages = t.FlushMessages
	}
	if c.NoDataLossEnabled() {
		p.RequiredAcks = sarama.WaitForAll
		p.Idempotent = true
		sc.Net.MaxOpenRequests = 1
		p.Retry.Max = retriesFor(c.DeliveryTimeout.Duration)
		p.Retry.BackoffFunc = backoff
		keepLookingForLeaders(sc, c.DeliveryTimeout.Duration)
	} else {
		p.RequiredAcks = sarama.WaitForLocal
		p.Idempotent = false
		sc.Net.MaxOpenRequests = 5
		p.Retry.Max = 10
		p.Retry.BackoffFunc = backoff
	}
	return sc, sc.Validate()
}

// keepLookingForLeaders makes the producer's metadata refresh retry, with backoff, for
// at least timeout before it fails.
//
// sarama's partition producer hands a record back as failed as soon as it cannot find
// the partition's leader, whatever Producer.Retry.Max says, and it looks for the
// leader with one metadata refresh (3 tries, 250 ms apart by default). A target that is
// unreachable for a second would therefore fail sends at once. With the refresh
// retrying for timeout, the partition producer blocks while the leader is unknown:
// the partition's records wait in order behind the one being retried (so order is
// kept and the engine feels backpressure), and they flow again as soon as the target
// answers. The extra retryBackoffMax covers the last backoff sarama skips when it
// would pass the deadline, so that no send fails before timeout.
//
// The long wait must cover the mirrored topics only. sarama retries a whole metadata
// refresh while any topic in it has a partition without a leader, and by default
// (Metadata.Full) the client refreshes every topic of the cluster, at creation and on
// each background refresh: one leaderless topic that nothing mirrors would hold the
// engine's start for about timeout. So the producer's client asks only for the topics
// it was asked about (the target topics the engine checks and writes to).
func keepLookingForLeaders(sc *sarama.Config, timeout time.Duration) {
	sc.Metadata.Full = false
	sc.Metadata.Timeout = timeout + retryBackoffMax
	sc.Metadata.Retry.Max = retriesFor(sc.Metadata.Timeout) + 1
	sc.Metadata.Retry.BackoffFunc = backoff
}

// ProducerChannelBuffer is the message count of each of the producer's channels (its
// input, each topic's and each partition's): sarama's default.
const ProducerChannelBuffer = 512

// ConsumerChannelBuffer is the number of records each partition's consumer reads ahead
// of the engine. They are outside the engine's byte budget (maxInFlightBytes), so the
// count is kept small: with 100 KB records it is 25 MB per assigned partition, plus the
// fetch being handed over (Consumer.Fetch.Default, 1 MiB, or one larger batch).
const ConsumerChannelBuffer = 256

// Fetch sizes by the source's round trip (FetchPartitionBytesFor).
const (
	fetchPartitionBytesMin = 1 << 20 // sarama's default, and the Java consumer's
	fetchPartitionBytesMax = 8 << 20
	fetchRoundTripStep     = 25 * time.Millisecond
)

// FetchPartitionBytesFor is how many bytes a fetch asks for per partition when the
// source answers in rtt and consumer.fetchPartitionBytes is not set: 1 MiB per 25 ms of
// round trip, at least 1 MiB (sarama's default, so a near source is read as before) and
// at most 8 MiB.
//
// sarama's consumer keeps one fetch per broker and sends the next one only once every
// partition of the last answer has handed its records over, so a partition moves at
// most one fetch per round trip plus the time to hand it over: with 1 MiB and a source
// 100 ms away that was about 40k records/s of 1 KiB, against 60k for a client that
// pipelines its fetches (issue 28, docs/performance.md "Across regions"). A fetch of
// 4 MiB at 100 ms carries four times as much per round trip. A larger fetch costs
// memory only while the answer is handed over, and only when the partitions have that
// much to read; Consumer.Fetch.MaxBytes (50 MiB) still bounds an answer.
func FetchPartitionBytesFor(rtt time.Duration) int32 {
	steps := max(int64(rtt/fetchRoundTripStep), 1)
	return int32(min(steps*fetchPartitionBytesMin, fetchPartitionBytesMax))
}

// ConsumerConfig returns the configuration of one consumer-group member on c.Source.
//
// Always: no auto-commit (the engine commits only acked offsets), start a partition
// the group never committed at c.InitialOffset (oldest by default, so records written
// to a new partition before the group noticed it are kept; the engine first looks for
// its target-side progress, see mirror's progress keeper), no silent reset of an out-of-range committed
// offset (the engine reports the gap), the sticky assignor (eager, so the drain before
// release sees a clean revoke), and metadata refreshed every topicSyncInterval (at most
// 30 s) so new source partitions are followed. With the no-data-loss policy, records of
// aborted transactions are skipped (read_committed).
func ConsumerConfig(c *config.Config, opts ...Option) (*sarama.Config, error) {
	sc, err := NewConfig(c.Source, append([]Option{WithRole(RoleSource)}, opts...)...)
	if err != nil {
		return nil, err
	}
	co := &sc.Consumer
	co.Return.Errors = true
	co.Offsets.AutoCommit.Enable = false
	co.Offsets.Initial = sarama.OffsetOldest
	if c.InitialOffset == config.InitialOffsetLatest {
		co.Offsets.Initial = sarama.OffsetNewest
	}
	co.Group.ResetInvalidOffsets = false
	co.Group.Rebalance.GroupStrategies = []sarama.BalanceStrategy{sarama.NewBalanceStrategySticky()}
	sc.ChannelBufferSize = ConsumerChannelBuffer
	if k := c.Consumer; k != nil {
		if k.FetchMinBytes > 0 {
			co.Fetch.Min = k.FetchMinBytes
		}
		if k.FetchPartitionBytes > 0 {
			co.Fetch.Default = k.FetchPartitionBytes
		}
		if k.FetchMaxWait.Duration > 0 {
			co.MaxWaitTime = k.FetchMaxWait.Duration
		}
		if t := k.SessionTimeout.Duration; t > 0 {
			co.Group.Session.Timeout = t
			co.Group.Heartbeat.Interval = min(co.Group.Heartbeat.Interval, t/3)
		}
	}
	if c.NoDataLossEnabled() {
		co.IsolationLevel = sarama.ReadCommitted
	}
	sc.Metadata.RefreshFrequency = MetadataRefresh(c)
	return sc, sc.Validate()
}

// AdminConfig returns the configuration of a cluster admin for the given cluster. It
// refreshes metadata as often as the consumers do.
func AdminConfig(c *config.Config, role string, opts ...Option) (*sarama.Config, error) {
	cl := c.Source
	if role == RoleTarget {
		cl = c.Target
	}
	sc, err := NewConfig(cl, append([]Option{WithRole(role)}, opts...)...)
	if err != nil {
		return nil, err
	}
	sc.Metadata.RefreshFrequency = MetadataRefresh(c)
	return sc, nil
}

// MetadataRefresh is how often the engine's clients refresh cluster metadata:
// topicSyncInterval, capped at 30 s (sarama's default of 10 min would leave new
// partitions unmirrored for minutes).
func MetadataRefresh(c *config.Config) time.Duration {
	d := c.TopicSyncInterval.Duration
	if d <= 0 || d > 30*time.Second {
		d = 30 * time.Second
	}
	return d
}

// Partitioner returns the sarama partitioner for a partitioning strategy: preserve
// uses the partition the engine sets on each message (the source partition), hash uses
// the key, roundRobin spreads records evenly.
func Partitioner(p config.Partitioning) sarama.PartitionerConstructor {
	switch p {
	case config.PartitioningHash:
		return sarama.NewHashPartitioner
	case config.PartitioningRoundRobin:
		return sarama.NewRoundRobinPartitioner
	default:
		return sarama.NewManualPartitioner
	}
}

// RetryBackoff is the producer's wait before a retry (0 first): the same backoff as
// ProducerConfig's, for the engine's pipelined producer.
func RetryBackoff(retries int) time.Duration { return backoff(retries, 0) }

// PipelinedProducerConfig returns the configuration of the client of the engine's
// pipelined idempotent producer (mirror/pipeline) with maxInFlight batches per
// partition in flight: ProducerConfig's (acks=all, timeouts, compression, flush
// settings, leader look-ups retried for deliveryTimeout) without sarama's idempotence,
// which refuses more than one open request per broker (the pipelined producer keeps
// the sequences itself), and with maxInFlight open requests per broker.
func PipelinedProducerConfig(c *config.Config, maxInFlight int, opts ...Option) (*sarama.Config, error) {
	sc, err := ProducerConfig(c, opts...)
	if err != nil {
		return nil, err
	}
	sc.Producer.Idempotent = false
	sc.Net.MaxOpenRequests = maxInFlight
	return sc, sc.Validate()
}

// backoff doubles from retryBackoffMin up to retryBackoffMax.
func backoff(retries, _ int) time.Duration {
	d := retryBackoffMin
	for i := 0; i < retries && d < retryBackoffMax; i++ {
		d *= 2
	}
	return min(d, retryBackoffMax)
}

// retriesFor returns a retry count whose summed backoff is at least timeout.
func retriesFor(timeout time.Duration) int {
	var total time.Duration
	n := 0
	for total < timeout {
		total += backoff(n, 0)
		n++
	}
	return max(n, 1)
}

// compressionCodec maps producer.compression to sarama's codec.
func compressionCodec(name string) sarama.CompressionCodec {
	switch name {
	case config.CompressionGzip:
		return sarama.CompressionGZIP
	case config.CompressionSnappy:
		return sarama.CompressionSnappy
	case config.CompressionLZ4:
		return sarama.CompressionLZ4
	case config.CompressionZstd:
		return sarama.CompressionZSTD
	}
	return sarama.CompressionNone
}
