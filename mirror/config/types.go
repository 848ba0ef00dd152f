package config

import (
	"encoding/json"
	"fmt"
	"time"
)

// APIVersion and Kind identify the configuration file's schema.
const (
	APIVersion = "kafkamirror.io/v1alpha1"
	Kind       = "MirrorConfig"
)

// Config is the whole mirror configuration: where to read, where to write, what to
// mirror and with which guarantees.
type Config struct {
	// APIVersion must be kafkamirror.io/v1alpha1.
	APIVersion string `json:"apiVersion"`
	// Kind must be MirrorConfig.
	Kind string `json:"kind"`
	// Source is the cluster records are read from.
	Source Cluster `json:"source"`
	// Target is the cluster records are written to.
	Target Cluster `json:"target"`
	// ConsumerGroup is the source consumer group whose committed offsets record progress.
	ConsumerGroup string `json:"consumerGroup"`
	// InitialOffset is where a source partition starts when neither the source group
	// nor the target-side progress knows how far it was mirrored: oldest (every record
	// still in the source) or latest (only records written from now on). Default oldest.
	InitialOffset InitialOffset `json:"initialOffset,omitempty"`
	// InitialPositions gives listed source partitions their own start offset, used
	// instead of initialOffset when neither the source group nor the target-side
	// progress knows how far the partition was mirrored. A failback starts this way
	// where the failover left the target (docs/failover.md). Partitions not listed
	// start at initialOffset.
	InitialPositions *InitialPositions `json:"initialPositions,omitempty"`
	// Topics selects and names the topics to mirror.
	Topics Topics `json:"topics"`
	// Partitioning chooses the target partition of each record. Default preserve.
	Partitioning Partitioning `json:"partitioning,omitempty"`
	// SyncTopics makes the engine create and expand target topics itself, at start and
	// every TopicSyncInterval. Default true; the operator sets false and does it itself.
	SyncTopics *bool `json:"syncTopics,omitempty"`
	// SyncTopicConfigs copies the configs set on each source topic (retention, cleanup
	// policy, ...) to its target when topics are synced, at creation and again whenever
	// the source's value changes, except the configs matched by topics.configExclude.
	// Configs the target refuses are logged and reported, and the rest are still
	// applied. Default true; set false to leave target topic configs alone.
	SyncTopicConfigs *bool `json:"syncTopicConfigs,omitempty"`
	// TopicSyncInterval is how often topics are re-synced and the topic selection
	// re-evaluated. Default 30s.
	TopicSyncInterval Duration `json:"topicSyncInterval,omitempty"`
	// NoDataLoss turns on the no-data-loss policy (acks=all, idempotence, commit only
	// what the target acked, stop on a send that finally fails). Default true.
	NoDataLoss *bool `json:"noDataLoss,omitempty"`
	// Streams is the number of consumer-group members in one process. Default 1.
	Streams int `json:"streams,omitempty"`
	// OffsetCommitInterval is how often acked source offsets are committed. Default 5s.
	OffsetCommitInterval Duration `json:"offsetCommitInterval,omitempty"`
	// DeliveryTimeout bounds how long one record may be retried before the engine stops
	// with an error. Default 2m.
	DeliveryTimeout Duration `json:"deliveryTimeout,omitempty"`
	// MaxInFlightPerPartition bounds records read but not yet acked, per source
	// partition, so memory stays flat when the target is slow. Default 10000. The
	// process holds at most 32768 in all (or this value, when larger).
	MaxInFlightPerPartition int `json:"maxInFlightPerPartition,omitempty"`
	// MaxInFlightBytes bounds the bytes (key, value and headers) of records read but not
	// yet acked, for the whole process, together with maxInFlightPerPartition: records
	// wait before the producer while it is used up. A record larger than the whole
	// budget still passes, alone. Default: a quarter of the container's memory limit when
	// one is set, else 256 MiB.
	MaxInFlightBytes int64 `json:"maxInFlightBytes,omitempty"`
	// Producer tunes the producer that writes to the target.
	Producer *Producer `json:"producer,omitempty"`
	// Consumer tunes the fetches from the source.
	Consumer *Consumer `json:"consumer,omitempty"`
	// Delivery is the guarantee a read_committed consumer of the target gets:
	// atLeastOnce (every source record at least once; a crash re-sends what was not
	// committed) or exactlyOnce (every source record exactly once, across crashes and
	// rebalances: records and source offsets are written in one target transaction per
	// source partition; needs partitioning preserve and no named handler; see
	// docs/exactly-once.md). Default atLeastOnce.
	Delivery Delivery `json:"delivery,omitempty"`
	// TransactionInterval is how long one exactlyOnce transaction collects records of a
	// source partition before it is committed: the latency a read_committed consumer
	// sees. At most offsetCommitInterval. Default 100ms; used only with exactlyOnce.
	TransactionInterval Duration `json:"transactionInterval,omitempty"`
	// Handlers is an ordered chain of message handlers applied to every record.
	Handlers []HandlerSpec `json:"handlers,omitempty"`
	// RebalanceListener is a named listener called when partitions are assigned or
	// released (after the built-in drain and commit).
	RebalanceListener *PluginSpec `json:"rebalanceListener,omitempty"`
	// Metrics configures the HTTP endpoint serving /metrics, /healthz and /readyz.
	Metrics Metrics `json:"metrics,omitempty"`
	// Groups turns on consumer-group offset translation: the committed offsets of the
	// matching source groups are translated to target offsets and committed to the
	// groups of the same name on the target while those have no active members, so
	// their consumers can fail over. Default: unset, no translation.
	Groups *Groups `json:"groups,omitempty"`

	// Provenance stamps every mirrored record with the clusters it came through and
	// drops records that would loop back, so that two clusters can mirror the same topic
	// names into each other (active-active). Default: off.
	Provenance *Provenance `json:"provenance,omitempty"`
}

// Groups selects the source consumer groups whose committed offsets are translated to
// the target (group checkpoints) and says how often.
type Groups struct {
	// Include lists regular expressions; a source consumer group is translated when its
	// whole name matches one of them.
	Include []string `json:"include"`
	// Exclude lists regular expressions that win over Include. The mirror's own
	// consumerGroup is never translated.
	Exclude []string `json:"exclude,omitempty"`
	// SyncInterval is how often the groups' offsets are translated and committed to the
	// target. Default 30s.
	SyncInterval Duration `json:"syncInterval,omitempty"`
}

// Provenance configures loop prevention for active-active mirroring. The engine writes
// a header (Header) whose value is the comma-separated list of the ids of the clusters
// the record was mirrored from, oldest first; its number of entries is the record's hop
// count. A record whose header names the target cluster, or that would exceed MaxHops,
// is dropped (counted, and its offset committed like a filtered record).
type Provenance struct {
	// Enabled turns loop prevention on. Default false.
	Enabled bool `json:"enabled"`
	// Header is the name of the provenance header. Default kafka-mirror-provenance.
	Header string `json:"header,omitempty"`
	// MaxHops is the most mirrors a record may pass through: a record that already
	// went through that many is dropped. Default 10.
	MaxHops int `json:"maxHops,omitempty"`
	// Strip leaves the header off the target's records (incoming records are still
	// checked). Only for a mirror whose target is not mirrored onwards: a record
	// without the header cannot be recognised when it comes back. Default false.
	Strip bool `json:"strip,omitempty"`
	// SourceName is the source cluster's id when the source does not report one in
	// its metadata (brokers before Kafka 0.10.1). Default: unset, the reported id.
	SourceName string `json:"sourceName,omitempty"`
	// TargetName is the target cluster's id when the target does not report one. It
	// must equal the SourceName (or reported id) that the mirror reading from this
	// cluster uses. Default: unset, the reported id.
	TargetName string `json:"targetName,omitempty"`
}

// Producer tunes the producer that writes to the target.
type Producer struct {
	// MaxMessageBytes replaces, for every target topic, the size limit of one record
	// batch that the engine otherwise reads from the target (each topic's
	// max.message.bytes, else the broker's message.max.bytes). Set it when the mirror
	// may not describe the target's configs, or to send smaller batches. Default: unset,
	// the target's limits.
	MaxMessageBytes int `json:"maxMessageBytes,omitempty"`
	// Compression is the codec of the batches written to the target: none, gzip,
	// snappy, lz4 or zstd (lz4 is cheap on CPU and saves cross-zone bytes). Default
	// none: the engine sizes batches against the target's limits in uncompressed bytes,
	// which is exact only without compression (an incompressible record near the limit
	// can grow past it), and sarama cannot pass a source batch on with its own codec.
	Compression string `json:"compression,omitempty"`
	// FlushFrequency sends a batch at least this often. Default: unset, as soon as the
	// previous request to that broker is answered; 5ms when flushBytes or flushMessages
	// is set (a batch below them is sent only on the frequency).
	FlushFrequency Duration `json:"flushFrequency,omitempty"`
	// FlushBytes sends a batch once it holds this many bytes, or on flushFrequency
	// (5ms unless set) when it holds fewer. Default: unset.
	FlushBytes int `json:"flushBytes,omitempty"`
	// FlushMessages sends a batch once it holds this many records, or on
	// flushFrequency (5ms unless set) when it holds fewer. Default: unset.
	FlushMessages int `json:"flushMessages,omitempty"`
	// Producers is the number of batching producers, each with its own connections,
	// that share the mirrored partitions: every source partition's records go through
	// one of them, so order and idempotence hold, and each target broker sees up to
	// this many requests in flight rather than one. A far target needs them: each
	// producer sends one request per round trip, with at most one batch per partition.
	// 1 sends everything through one producer (a little less CPU and memory on a near
	// target). Ignored with delivery exactlyOnce. Default 8, at most 16.
	Producers int `json:"producers,omitempty"`
	// MaxInFlightRequests is the most record batches per target partition in flight,
	// 1 to 5. Above 1 each batching producer is the engine's pipelined idempotent
	// producer (mirror/pipeline), which keeps that many batches per partition in
	// flight with their idempotence sequences, as Kafka's Java producer does: a far
	// target moves several batches per partition per round trip. 1 keeps sarama's
	// idempotent producers (one request per broker in flight). Ignored with delivery
	// exactlyOnce or noDataLoss false. Default 5.
	MaxInFlightRequests int `json:"maxInFlightRequests,omitempty"`
}

// Compression codecs for producer.compression.
const (
	CompressionNone   = "none"
	CompressionGzip   = "gzip"
	CompressionSnappy = "snappy"
	CompressionLZ4    = "lz4"
	CompressionZstd   = "zstd"
	// DefaultCompression is used when producer.compression is unset.
	DefaultCompression = CompressionNone
)

// Compressions lists the producer.compression values, for messages.
var Compressions = []string{CompressionNone, CompressionGzip, CompressionSnappy, CompressionLZ4, CompressionZstd}

// Consumer tunes the fetches from the source.
type Consumer struct {
	// FetchMinBytes is how many bytes a fetch waits for (up to fetchMaxWait). Default 1.
	FetchMinBytes int32 `json:"fetchMinBytes,omitempty"`
	// FetchPartitionBytes is how many bytes a fetch asks for per partition (a larger
	// record batch is still fetched whole). Default: by the source's round trip measured
	// at start, 1 MiB per 25 ms, from 1 MiB (a near source) to 8 MiB (docs/performance.md,
	// "The source far away").
	FetchPartitionBytes int32 `json:"fetchPartitionBytes,omitempty"`
	// FetchMaxWait is how long the broker may wait for fetchMinBytes. Default 500ms.
	FetchMaxWait Duration `json:"fetchMaxWait,omitempty"`
	// GroupInstanceID makes each stream a static member of the consumer group
	// (KIP-345): stream i joins as "<groupInstanceId>-<i>". A process restarted after a
	// crash with the same ID gets its partitions back at once instead of after the
	// killed member's session timed out. On a clean stop the engine drains, commits and
	// removes its static members, so the others take over at once. Every process of
	// the group needs its own ID. "${NAME}" reads it from the environment variable NAME
	// (the operator sets it to the pod's name). Empty: dynamic membership.
	GroupInstanceID string `json:"groupInstanceId,omitempty"`
	// SessionTimeout is how long the group coordinator waits for a silent member
	// (killed, or cut off) before it gives the member's partitions to the others.
	// Between 6s and 30m. Default 10s.
	SessionTimeout Duration `json:"sessionTimeout,omitempty"`
}

// Cluster says how to reach one Kafka cluster.
type Cluster struct {
	// BootstrapServers lists host:port addresses of brokers to bootstrap from.
	BootstrapServers []string `json:"bootstrapServers"`
	// ClientID is the Kafka client id. Default kafka-mirror.
	ClientID string `json:"clientId,omitempty"`
	// TLS turns on TLS; an empty object uses the system roots.
	TLS *TLS `json:"tls,omitempty"`
	// SASL turns on SASL authentication.
	SASL *SASL `json:"sasl,omitempty"`
	// Rack is the client's rack (availability zone): brokers with follower fetching
	// (KIP-392, replica.selector.class) then serve the source's fetches from a replica in
	// the same zone. "${NAME}" reads it from the environment variable NAME when the
	// engine starts (the operator sets one from the pod's zone label); empty fetches from
	// leaders.
	Rack string `json:"rack,omitempty"`
}

// TLS configures TLS towards a cluster. Every field names a file.
type TLS struct {
	// CAFile is a PEM bundle of CAs to trust instead of the system roots.
	CAFile string `json:"caFile,omitempty"`
	// CAFiles are more PEM bundles trusted alongside CAFile, so a CA rotation can keep
	// the old and the new CA side by side.
	CAFiles []string `json:"caFiles,omitempty"`
	// CertFile is the PEM client certificate for mutual TLS; needs KeyFile.
	CertFile string `json:"certFile,omitempty"`
	// KeyFile is the PEM private key of CertFile.
	KeyFile string `json:"keyFile,omitempty"`
	// InsecureSkipVerify disables server certificate verification. For tests only.
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
}

// SASL mechanisms supported.
const (
	SASLPlain       = "PLAIN"
	SASLSCRAMSHA256 = "SCRAM-SHA-256"
	SASLSCRAMSHA512 = "SCRAM-SHA-512"
	// SASLOAuthBearer is SASL/OAUTHBEARER with tokens from an OAuth 2.0 client
	// credentials grant (Confluent Cloud, Event Hubs, Strimzi with Keycloak, ...).
	SASLOAuthBearer = "OAUTHBEARER"
	// SASLAWSMSKIAM is Amazon MSK's IAM access control: SASL/OAUTHBEARER with a token
	// signed with the pod's AWS credentials.
	SASLAWSMSKIAM = "AWS_MSK_IAM"
)

// SASLMechanisms lists the supported mechanisms, for messages.
var SASLMechanisms = []string{SASLPlain, SASLSCRAMSHA256, SASLSCRAMSHA512, SASLOAuthBearer, SASLAWSMSKIAM}

// SASL configures SASL authentication towards a cluster.
type SASL struct {
	// Mechanism is PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or AWS_MSK_IAM.
	Mechanism string `json:"mechanism"`
	// Username is the SASL user name (PLAIN and SCRAM).
	Username string `json:"username,omitempty"`
	// PasswordFile is the file holding the password (a mounted Secret key; PLAIN and SCRAM).
	PasswordFile string `json:"passwordFile,omitempty"`
	// OAuth configures OAUTHBEARER.
	OAuth *OAuth `json:"oauth,omitempty"`
	// AWS configures AWS_MSK_IAM.
	AWS *AWS `json:"aws,omitempty"`
}

// OAuth is an OAuth 2.0 client credentials grant whose access tokens authenticate the
// mirror (SASL/OAUTHBEARER). Tokens are fetched again a minute before they expire.
type OAuth struct {
	// TokenURL is the token endpoint (https://.../oauth2/token).
	TokenURL string `json:"tokenUrl"`
	// ClientID is the OAuth client id.
	ClientID string `json:"clientId"`
	// ClientSecretFile is the file holding the client secret (a mounted Secret key).
	ClientSecretFile string `json:"clientSecretFile"`
	// Scopes are requested with the token.
	Scopes []string `json:"scopes,omitempty"`
	// Extensions are SASL extensions sent with the token (KIP-342), such as
	// logicalCluster and identityPoolId for Confluent Cloud.
	Extensions map[string]string `json:"extensions,omitempty"`
}

// AWS configures AWS MSK IAM authentication. Credentials come from the default chain:
// IRSA or EKS Pod Identity in Kubernetes, the instance profile or environment elsewhere.
type AWS struct {
	// Region is the MSK cluster's AWS region.
	Region string `json:"region"`
	// RoleARN is a role assumed with those credentials before signing. Default: none.
	RoleARN string `json:"roleArn,omitempty"`
}

// Topics selects source topics and names their targets.
type Topics struct {
	// Include lists regular expressions; a source topic is mirrored when its whole name
	// matches one of them.
	Include []string `json:"include"`
	// Exclude lists regular expressions that win over Include. Topics named __* are
	// never mirrored.
	Exclude []string `json:"exclude,omitempty"`
	// Rename maps a source topic name to its target name. Default: the same name.
	Rename *Rename `json:"rename,omitempty"`
	// ReplicationFactor is the replication factor of the target topics the sync
	// creates. Unset (or -1): the source topic's replication factor, capped at the
	// number of target brokers. A number from 1 is used as it is, and a target with
	// fewer brokers refuses the topic. Existing target topics are never changed.
	ReplicationFactor int32 `json:"replicationFactor,omitempty"`
	// ConfigExclude lists regular expressions of topic config names that syncTopicConfigs
	// never copies; a config is excluded when its whole name matches one of them.
	// Setting the list replaces the default, which leaves out what depends on the target
	// cluster rather than on the data: min.insync.replicas,
	// unclean.leader.election.enable, replication throttles, message.timestamp.*
	// (LogAppendTime would overwrite the mirrored timestamps, a bound on timestamp age
	// would refuse a mirrored backlog) and tiered or removed storage settings. [""]
	// copies every config.
	ConfigExclude []string `json:"configExclude"`
}

// Rename maps source topic names to target topic names. Set at most one field.
type Rename struct {
	// Prefix is put in front of the source topic name.
	Prefix string `json:"prefix,omitempty"`
	// Template is the target name with {topic} standing for the source topic name,
	// for example "dc1.{topic}.mirror".
	Template string `json:"template,omitempty"`
	// StripPrefix is removed from the front of the source topic name: the reverse of
	// Prefix, for a failback mirror ("dc1." maps dc1.orders back to orders). Only
	// topics that start with it, and are longer, are selected; another topic the
	// include expressions match is not mirrored.
	StripPrefix string `json:"stripPrefix,omitempty"`
}

// Partitioning chooses the target partition of a record.
type Partitioning string

// Partitioning strategies.
const (
	// PartitioningPreserve writes source partition p to target partition p.
	PartitioningPreserve Partitioning = "preserve"
	// PartitioningHash chooses the target partition by hashing the key.
	PartitioningHash Partitioning = "hash"
	// PartitioningRoundRobin spreads records over the target partitions in turn.
	PartitioningRoundRobin Partitioning = "roundRobin"
)

// Delivery is the delivery guarantee towards read_committed consumers of the target.
type Delivery string

// Delivery guarantees.
const (
	// DeliveryAtLeastOnce may write a record twice after a crash, never loses one.
	DeliveryAtLeastOnce Delivery = "atLeastOnce"
	// DeliveryExactlyOnce writes records and source offsets in target transactions.
	DeliveryExactlyOnce Delivery = "exactlyOnce"
)

// InitialOffset chooses where a partition without any recorded progress starts.
type InitialOffset string

// Initial offsets.
const (
	// InitialOffsetOldest starts at the oldest record the source still holds.
	InitialOffsetOldest InitialOffset = "oldest"
	// InitialOffsetLatest starts at the end: only records written afterwards are mirrored.
	InitialOffsetLatest InitialOffset = "latest"
)

// HandlerSpec is one step of the handler chain: exactly one of CEL or Name is set.
type HandlerSpec struct {
	// CEL is a filter and/or transform written in CEL.
	CEL *CELHandler `json:"cel,omitempty"`
	// Name selects a handler registered in the engine's handler registry.
	Name string `json:"name,omitempty"`
	// Args are passed to the named handler's factory.
	Args map[string]string `json:"args,omitempty"`
}

// OnError policies for a handler whose evaluation fails at run time.
const (
	// OnErrorFail stops the engine without committing past the record (default).
	OnErrorFail = "fail"
	// OnErrorSkip drops the record, counts it as skipped and goes on.
	OnErrorSkip = "skip"
)

// CELHandler is a handler written in CEL. Expressions see `record` with fields topic,
// partition, offset, timestamp, key, value and headers.
type CELHandler struct {
	// Filter is a boolean expression; false drops the record.
	Filter string `json:"filter,omitempty"`
	// Transform rewrites parts of the record; absent parts stay unchanged.
	Transform *CELTransform `json:"transform,omitempty"`
	// OnError is fail (default) or skip.
	OnError string `json:"onError,omitempty"`
}

// CELTransform holds one optional expression per record part.
type CELTransform struct {
	// Key is an expression giving the new key (bytes, string or null).
	Key string `json:"key,omitempty"`
	// Value is an expression giving the new value (bytes, string or null).
	Value string `json:"value,omitempty"`
	// Headers is an expression giving the new headers (a map or a list of pairs).
	Headers string `json:"headers,omitempty"`
	// Topic is an expression giving the new topic name (before rename).
	Topic string `json:"topic,omitempty"`
	// Partition is an expression giving the new target partition.
	Partition string `json:"partition,omitempty"`
}

// PluginSpec names a registered plugin (a rebalance listener) and its arguments.
type PluginSpec struct {
	// Name selects the plugin in its registry.
	Name string `json:"name"`
	// Args are passed to the plugin's factory.
	Args map[string]string `json:"args,omitempty"`
}

// Metrics configures the engine's HTTP endpoint.
type Metrics struct {
	// Address is the listen address of /metrics, /healthz and /readyz. Default ":8080";
	// "0" turns the endpoint off.
	Address string `json:"address,omitempty"`
}

// Duration is a time.Duration written as a Go duration string ("5s", "2m").
type Duration struct {
	time.Duration
}

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(d.Duration.String())
}

// UnmarshalJSON reads a duration string such as "5s" or "1m30s".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration must be a string such as \"5s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// BoolPtr returns a pointer to b, for the optional booleans of Config.
func BoolPtr(b bool) *bool { return &b }

// ProducerCompression returns producer.compression, DefaultCompression when unset.
func (c *Config) ProducerCompression() string {
	if c.Producer == nil || c.Producer.Compression == "" {
		return DefaultCompression
	}
	return c.Producer.Compression
}

// MaxInFlightRequests returns producer.maxInFlightRequests, DefaultMaxInFlightRequests
// when unset.
func (c *Config) MaxInFlightRequests() int {
	if c.Producer == nil || c.Producer.MaxInFlightRequests == 0 {
		return DefaultMaxInFlightRequests
	}
	return c.Producer.MaxInFlightRequests
}

// BatchProducers returns producer.producers, DefaultProducers when unset.
func (c *Config) BatchProducers() int {
	if c.Producer == nil || c.Producer.Producers == 0 {
		return DefaultProducers
	}
	return c.Producer.Producers
}

// ProducerMaxMessageBytes returns producer.maxMessageBytes, 0 when unset.
func (c *Config) ProducerMaxMessageBytes() int {
	if c.Producer == nil {
		return 0
	}
	return c.Producer.MaxMessageBytes
}

// ProvenanceEnabled reports whether loop prevention (provenance) is on.
func (c *Config) ProvenanceEnabled() bool { return c.Provenance != nil && c.Provenance.Enabled }

// ExactlyOnce reports whether delivery is exactlyOnce.
func (c *Config) ExactlyOnce() bool { return c.Delivery == DeliveryExactlyOnce }

// NoDataLossEnabled reports whether the no-data-loss policy is on (the default).
func (c *Config) NoDataLossEnabled() bool { return c.NoDataLoss == nil || *c.NoDataLoss }

// SyncTopicConfigsEnabled reports whether topic syncs copy source topic configs (the
// default).
func (c *Config) SyncTopicConfigsEnabled() bool {
	return c.SyncTopicConfigs == nil || *c.SyncTopicConfigs
}

// SyncTopicsEnabled reports whether the engine syncs target topics itself (the default).
func (c *Config) SyncTopicsEnabled() bool { return c.SyncTopics == nil || *c.SyncTopics }

// InitialPositions are start offsets for source partitions the mirror has no progress
// of.
type InitialPositions struct {
	// FromFailover is the consumerGroup of a mirror that failed over to this mirror's
	// SOURCE cluster (this mirror is its reverse): the engine reads the failback points
	// that failover wrote to the progress topic of that group on the source cluster and
	// starts every partition without progress of its own at the target end offset of
	// the cutover (when the topic is still the same incarnation). No failover record
	// there stops the engine with an error. Requires provenance.enabled.
	FromFailover string `json:"fromFailover,omitempty"`
	// Offsets lists the start offset of each listed source partition.
	Offsets []PartitionOffset `json:"offsets,omitempty"`
}

// PartitionOffset is the start offset of one source partition.
type PartitionOffset struct {
	// Topic and Partition name the source partition.
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// TopicID, when set, is the topic's ID (its incarnation) the offset was taken from:
	// the offset is not used for a topic deleted and created again since.
	TopicID string `json:"topicId,omitempty"`
	// Offset is the first source offset to mirror.
	Offset int64 `json:"offset"`
}
