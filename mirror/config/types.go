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
	// Topics selects and names the topics to mirror.
	Topics Topics `json:"topics"`
	// Partitioning chooses the target partition of each record. Default preserve.
	Partitioning Partitioning `json:"partitioning,omitempty"`
	// SyncTopics makes the engine create and expand target topics itself, at start and
	// every TopicSyncInterval. Default true; the operator sets false and does it itself.
	SyncTopics *bool `json:"syncTopics,omitempty"`
	// SyncTopicConfigs copies source topic configs (retention, cleanup policy, ...) to
	// target topics when topics are synced. Default false.
	SyncTopicConfigs bool `json:"syncTopicConfigs,omitempty"`
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
	// partition, so memory stays flat when the target is slow. Default 10000.
	MaxInFlightPerPartition int `json:"maxInFlightPerPartition,omitempty"`
	// MaxInFlightBytes bounds the bytes (key, value and headers) of records read but not
	// yet acked, for the whole process, together with maxInFlightPerPartition: records
	// wait before the producer while it is used up. A record larger than the whole
	// budget still passes, alone. Default: a quarter of the container's memory limit when
	// one is set, else 256 MiB.
	MaxInFlightBytes int64 `json:"maxInFlightBytes,omitempty"`
	// Producer tunes the producer that writes to the target.
	Producer *Producer `json:"producer,omitempty"`
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
}

// Producer tunes the producer that writes to the target.
type Producer struct {
	// MaxMessageBytes replaces, for every target topic, the size limit of one record
	// batch that the engine otherwise reads from the target (each topic's
	// max.message.bytes, else the broker's message.max.bytes). Set it when the mirror
	// may not describe the target's configs, or to send smaller batches. Default: unset,
	// the target's limits.
	MaxMessageBytes int `json:"maxMessageBytes,omitempty"`
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
}

// TLS configures TLS towards a cluster. Every field names a file.
type TLS struct {
	// CAFile is a PEM bundle of CAs to trust instead of the system roots.
	CAFile string `json:"caFile,omitempty"`
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
)

// SASL configures SASL authentication towards a cluster.
type SASL struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
	Mechanism string `json:"mechanism"`
	// Username is the SASL user name.
	Username string `json:"username"`
	// PasswordFile is the file holding the password (a mounted Secret key).
	PasswordFile string `json:"passwordFile"`
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
}

// Rename maps source topic names to target topic names. Set at most one field.
type Rename struct {
	// Prefix is put in front of the source topic name.
	Prefix string `json:"prefix,omitempty"`
	// Template is the target name with {topic} standing for the source topic name,
	// for example "dc1.{topic}.mirror".
	Template string `json:"template,omitempty"`
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

// ProducerMaxMessageBytes returns producer.maxMessageBytes, 0 when unset.
func (c *Config) ProducerMaxMessageBytes() int {
	if c.Producer == nil {
		return 0
	}
	return c.Producer.MaxMessageBytes
}

// ExactlyOnce reports whether delivery is exactlyOnce.
func (c *Config) ExactlyOnce() bool { return c.Delivery == DeliveryExactlyOnce }

// NoDataLossEnabled reports whether the no-data-loss policy is on (the default).
func (c *Config) NoDataLossEnabled() bool { return c.NoDataLoss == nil || *c.NoDataLoss }

// SyncTopicsEnabled reports whether the engine syncs target topics itself (the default).
func (c *Config) SyncTopicsEnabled() bool { return c.SyncTopics == nil || *c.SyncTopics }
