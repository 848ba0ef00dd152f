package config

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// minimal is the smallest valid config file.
const minimal = `apiVersion: kafkamirror.io/v1alpha1
kind: MirrorConfig
source: {bootstrapServers: ["source-kafka:9092"]}
target: {bootstrapServers: ["target-kafka:9092"]}
consumerGroup: kafka-mirror.default.orders
topics: {include: ["orders\\..*"]}
`

// canonical is the config example of the design document, field for field.
const canonical = `apiVersion: kafkamirror.io/v1alpha1
kind: MirrorConfig
source:
  bootstrapServers: ["source-kafka:9092"]
  sasl: {mechanism: SCRAM-SHA-512, username: mirror, passwordFile: /etc/kafka-mirror/secrets/source/password}
  tls: {caFile: /etc/kafka-mirror/secrets/source-ca/ca.crt}
target:
  bootstrapServers: ["target-kafka:9092"]
consumerGroup: kafka-mirror.default.orders
topics:
  include: ["orders\\..*", "payments"]
  exclude: ["orders\\.tmp\\..*"]
  rename: {prefix: ""}
partitioning: preserve
syncTopics: true
noDataLoss: true
streams: 4
offsetCommitInterval: 5s
deliveryTimeout: 2m
maxInFlightPerPartition: 10000
handlers:
  - cel: {filter: "!('skip' in record.headers)"}
metrics: {address: ":8080"}
`

func TestParseValid(t *testing.T) {
	tests := map[string]struct {
		yaml  string
		check func(t *testing.T, c *Config)
	}{
		"minimal gets every default": {
			yaml: minimal,
			check: func(t *testing.T, c *Config) {
				want := &Config{
					APIVersion:              APIVersion,
					Kind:                    Kind,
					Source:                  Cluster{BootstrapServers: []string{"source-kafka:9092"}, ClientID: DefaultClientID},
					Target:                  Cluster{BootstrapServers: []string{"target-kafka:9092"}, ClientID: DefaultClientID},
					ConsumerGroup:           "kafka-mirror.default.orders",
					InitialOffset:           InitialOffsetOldest,
					Topics:                  Topics{Include: []string{`orders\..*`}, ConfigExclude: DefaultTopicConfigExclude},
					Partitioning:            PartitioningPreserve,
					SyncTopics:              BoolPtr(true),
					SyncTopicConfigs:        BoolPtr(true),
					NoDataLoss:              BoolPtr(true),
					Streams:                 1,
					OffsetCommitInterval:    Duration{5 * time.Second},
					DeliveryTimeout:         Duration{2 * time.Minute},
					TopicSyncInterval:       Duration{30 * time.Second},
					MaxInFlightPerPartition: 10000,
					Delivery:                DeliveryAtLeastOnce,
					TransactionInterval:     Duration{100 * time.Millisecond},
					Metrics:                 Metrics{Address: ":8080"},
				}
				if !reflect.DeepEqual(c, want) {
					t.Fatalf("got  %+v\nwant %+v", c, want)
				}
				if !c.NoDataLossEnabled() || !c.SyncTopicsEnabled() || !c.SyncTopicConfigsEnabled() {
					t.Fatal("noDataLoss, syncTopics and syncTopicConfigs must default to on")
				}
			},
		},
		"the design's canonical example": {
			yaml: canonical,
			check: func(t *testing.T, c *Config) {
				if c.Source.SASL == nil || c.Source.SASL.Mechanism != SASLSCRAMSHA512 || c.Source.SASL.PasswordFile != "/etc/kafka-mirror/secrets/source/password" {
					t.Errorf("source.sasl = %+v", c.Source.SASL)
				}
				if c.Source.TLS == nil || c.Source.TLS.CAFile != "/etc/kafka-mirror/secrets/source-ca/ca.crt" {
					t.Errorf("source.tls = %+v", c.Source.TLS)
				}
				if got := c.Topics.Include; !reflect.DeepEqual(got, []string{`orders\..*`, "payments"}) {
					t.Errorf("topics.include = %q", got)
				}
				if c.Streams != 4 || c.MaxInFlightPerPartition != 10000 || c.DeliveryTimeout.Duration != 2*time.Minute {
					t.Errorf("streams %d, maxInFlight %d, deliveryTimeout %v", c.Streams, c.MaxInFlightPerPartition, c.DeliveryTimeout)
				}
				if len(c.Handlers) != 1 || c.Handlers[0].CEL == nil || c.Handlers[0].CEL.Filter != "!('skip' in record.headers)" || c.Handlers[0].CEL.OnError != OnErrorFail {
					t.Errorf("handlers = %+v", c.Handlers)
				}
				if got := c.Topics.Rename.TargetTopic("orders.eu"); got != "orders.eu" {
					t.Errorf("an empty prefix renamed orders.eu to %q", got)
				}
			},
		},
		"JSON is YAML too": {
			yaml: `{"apiVersion":"kafkamirror.io/v1alpha1","kind":"MirrorConfig","source":{"bootstrapServers":["a:1"]},"target":{"bootstrapServers":["b:1"]},"consumerGroup":"g","topics":{"include":["t"]},"noDataLoss":false,"syncTopics":false}`,
			check: func(t *testing.T, c *Config) {
				if c.NoDataLossEnabled() || c.SyncTopicsEnabled() {
					t.Fatal("explicit false must stay false")
				}
			},
		},
		"provenance gets its defaults": {
			yaml: minimal + "provenance: {enabled: true}\n",
			check: func(t *testing.T, c *Config) {
				want := &Provenance{Enabled: true, Header: DefaultProvenanceHeader, MaxHops: DefaultProvenanceMaxHops}
				if !reflect.DeepEqual(c.Provenance, want) || !c.ProvenanceEnabled() {
					t.Fatalf("provenance = %+v, want %+v", c.Provenance, want)
				}
			},
		},
		"same cluster with a rename is allowed": {
			yaml: strings.NewReplacer("target-kafka:9092", "SOURCE-KAFKA:9092",
				`topics: {include: ["orders\\..*"]}`, `topics: {include: ["orders\\..*"], rename: {template: "dc1.{topic}"}}`).Replace(minimal),
			check: func(t *testing.T, c *Config) {
				if got := c.Topics.Rename.TargetTopic("orders"); got != "dc1.orders" {
					t.Fatalf("template renamed orders to %q", got)
				}
			},
		},
		"metrics off, durations in Go syntax, every partitioning": {
			yaml: minimal + "metrics: {address: \"0\"}\noffsetCommitInterval: 1m30s\npartitioning: roundRobin\n",
			check: func(t *testing.T, c *Config) {
				if c.OffsetCommitInterval.Duration != 90*time.Second || c.Partitioning != PartitioningRoundRobin || c.Metrics.Address != "0" {
					t.Fatalf("got %v %v %q", c.OffsetCommitInterval, c.Partitioning, c.Metrics.Address)
				}
			},
		},
		"initialOffset defaults to oldest, latest is kept": {
			yaml: minimal + "initialOffset: latest\n",
			check: func(t *testing.T, c *Config) {
				if c.InitialOffset != InitialOffsetLatest {
					t.Fatalf("initialOffset %q, want latest", c.InitialOffset)
				}
				d := &Config{}
				d.Default()
				if d.InitialOffset != InitialOffsetOldest {
					t.Fatalf("default initialOffset %q, want oldest", d.InitialOffset)
				}
			},
		},
		// Issue 30 follow-up: sarama sends a batch that has not reached flushBytes or
		// flushMessages only on flushFrequency; without one a partly filled batch (a
		// quiet partition, the record that reserved the in-flight budget) waits for
		// more records forever. Set either threshold alone and the batch waits at most
		// DefaultFlushFrequency, as Kafka's producer lingers; a frequency set is kept.
		"flushBytes alone gets a flushFrequency": {
			yaml: minimal + "producer: {flushBytes: 1048576}\n",
			check: func(t *testing.T, c *Config) {
				if got := c.Producer.FlushFrequency.Duration; got != DefaultFlushFrequency || DefaultFlushFrequency <= 0 {
					t.Fatalf("producer.flushFrequency %v with flushBytes alone, want %v", got, DefaultFlushFrequency)
				}
			},
		},
		"flushMessages alone gets a flushFrequency": {
			yaml: minimal + "producer: {flushMessages: 500}\n",
			check: func(t *testing.T, c *Config) {
				if got := c.Producer.FlushFrequency.Duration; got != DefaultFlushFrequency {
					t.Fatalf("producer.flushFrequency %v with flushMessages alone, want %v", got, DefaultFlushFrequency)
				}
			},
		},
		"flushFrequency set is kept, none without thresholds": {
			yaml: minimal + "producer: {flushBytes: 1048576, flushFrequency: 50ms}\n",
			check: func(t *testing.T, c *Config) {
				if got := c.Producer.FlushFrequency.Duration; got != 50*time.Millisecond {
					t.Fatalf("producer.flushFrequency %v, want the 50ms set", got)
				}
				d := &Config{Producer: &Producer{Compression: CompressionLZ4}}
				d.Default()
				if got := d.Producer.FlushFrequency.Duration; got != 0 {
					t.Fatalf("producer.flushFrequency %v without flushBytes or flushMessages, want unset (send when the previous request is answered)", got)
				}
			},
		},
		"named handler and listener with args": {
			yaml: minimal + "handlers: [{name: header-filter, args: {mode: drop, header: skip}}]\nrebalanceListener: {name: log, args: {verbosity: \"1\"}}\n",
			check: func(t *testing.T, c *Config) {
				if c.Handlers[0].Name != "header-filter" || c.Handlers[0].Args["header"] != "skip" || c.RebalanceListener.Args["verbosity"] != "1" {
					t.Fatalf("handlers %+v listener %+v", c.Handlers, c.RebalanceListener)
				}
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := Parse([]byte(tc.yaml))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			tc.check(t, c)
		})
	}
}

func TestParseInvalid(t *testing.T) {
	tests := map[string]struct {
		yaml string
		want string
	}{
		"unknown field": {
			yaml: minimal + "bogus: 1\n",
			want: `invalid mirror config: bogus: Forbidden: unknown field (keys are case-sensitive)`,
		},
		// Keys match as the API server matches a KafkaMirror's: case-sensitively (issue 30
		// item 13: `ConsumerGroup:` and `sourCe:` were taken for consumerGroup and source).
		"key spelt with another case": {
			yaml: strings.Replace(minimal, "consumerGroup:", "ConsumerGroup:", 1),
			want: "invalid mirror config: [ConsumerGroup: Forbidden: unknown field (keys are case-sensitive), consumerGroup: Required value: the source consumer group that stores the mirror's progress]",
		},
		// Every problem at once, each with its path: an unknown nested field does not hide
		// the others (issue 31 item 7).
		"unknown nested field and an invalid value": {
			yaml: strings.Replace(minimal, "topics: {", "topics: {nested: 1, ", 1) + "streams: -1\n",
			want: "invalid mirror config: [topics.nested: Forbidden: unknown field (keys are case-sensitive), streams: Invalid value: -1: must be between 1 and 64]",
		},
		"duplicate field": {
			yaml: minimal + "streams: 2\nstreams: 3\n",
			want: "while parsing the mirror config: yaml: unmarshal errors:\n  line 8: key \"streams\" already set in map",
		},
		"not YAML": {
			yaml: "a: [",
			want: "while parsing the mirror config: yaml: line 1: did not find expected node content",
		},
		"duration not a string": {
			yaml: minimal + "offsetCommitInterval: 5\n",
			want: `while parsing the mirror config: a duration must be a string such as "5s": json: cannot unmarshal number into Go value of type string`,
		},
		"duration not a duration": {
			yaml: minimal + "deliveryTimeout: soon\n",
			want: `while parsing the mirror config: time: invalid duration "soon"`,
		},
		"wrong kind": {
			yaml: strings.Replace(minimal, "kind: MirrorConfig", "kind: KafkaMirror", 1),
			want: `invalid mirror config: kind: Unsupported value: "KafkaMirror": supported values: "MirrorConfig"`,
		},
		"empty file: every required field at once": {
			yaml: "",
			want: "invalid mirror config: [source.bootstrapServers: Required value: at least one host:port, " +
				"target.bootstrapServers: Required value: at least one host:port, " +
				"consumerGroup: Required value: the source consumer group that stores the mirror's progress, " +
				"topics.include: Required value: at least one regular expression selecting source topics]",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := Parse([]byte(tc.yaml))
			if err == nil {
				t.Fatalf("Parse succeeded: %+v", c)
			}
			if err.Error() != tc.want {
				t.Fatalf("error =\n%s\nwant\n%s", err, tc.want)
			}
		})
	}
}

// validConfig returns a defaulted, valid config for Validate cases to break.
func validConfig(t *testing.T) *Config {
	t.Helper()
	c, err := Parse([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestValidate(t *testing.T) {
	tests := map[string]struct {
		mutate func(c *Config)
		want   []string
	}{
		"streams too many": {
			mutate: func(c *Config) { c.Streams = 65 },
			want:   []string{"streams: Invalid value: 65: must be between 1 and 64"},
		},
		"streams negative": {
			mutate: func(c *Config) { c.Streams = -1 },
			want:   []string{"streams: Invalid value: -1: must be between 1 and 64"},
		},
		"partitioning": {
			mutate: func(c *Config) { c.Partitioning = "random" },
			want:   []string{`partitioning: Unsupported value: "random": supported values: "preserve", "hash", "roundRobin"`},
		},
		"initialOffset": {
			mutate: func(c *Config) { c.InitialOffset = "earliest" },
			want:   []string{`initialOffset: Unsupported value: "earliest": supported values: "oldest", "latest"`},
		},
		"initialPositions": {
			mutate: func(c *Config) {
				c.InitialPositions = &InitialPositions{Offsets: []PartitionOffset{
					{Topic: "orders", Partition: 0, Offset: 10},
					{Topic: "", Partition: -1, Offset: -5},
					{Topic: "orders", Partition: 0, Offset: 20},
				}}
			},
			want: []string{
				"initialPositions.offsets[1].topic: Required value: the source topic",
				"initialPositions.offsets[1].partition: Invalid value: -1: must be 0 or more",
				"initialPositions.offsets[1].offset: Invalid value: -5: must be 0 or more",
				`initialPositions.offsets[2]: Duplicate value: "orders partition 0, also at offsets[0]"`,
			},
		},
		"fromFailover without provenance": {
			mutate: func(c *Config) { c.InitialPositions = &InitialPositions{FromFailover: "kafka-mirror.default.orders"} },
			want:   []string{`initialPositions.fromFailover: Invalid value: "kafka-mirror.default.orders": a failback needs provenance.enabled: true, so that records that came from this mirror's target (left-behind records mirrored forward later, or a mirror restarted by mistake) are never copied back`},
		},
		"negative durations": {
			mutate: func(c *Config) {
				c.OffsetCommitInterval.Duration = -time.Second
				c.DeliveryTimeout.Duration = -time.Minute
				c.TopicSyncInterval.Duration = -time.Hour
			},
			want: []string{
				`offsetCommitInterval: Invalid value: "-1s": must be a positive duration`,
				`deliveryTimeout: Invalid value: "-1m0s": must be a positive duration`,
				`topicSyncInterval: Invalid value: "-1h0m0s": must be a positive duration`,
			},
		},
		"max in flight": {
			mutate: func(c *Config) { c.MaxInFlightPerPartition = -5 },
			want:   []string{"maxInFlightPerPartition: Invalid value: -5: must be at least 1"},
		},
		"max in flight bytes": {
			mutate: func(c *Config) { c.MaxInFlightBytes = -1 },
			want:   []string{"maxInFlightBytes: Invalid value: -1: must be positive (unset: derived from the container's memory limit)"},
		},
		"producer producers": {
			mutate: func(c *Config) { c.Producer = &Producer{Producers: 17} },
			want:   []string{"producer.producers: Invalid value: 17: must be between 1 and 16 (0: the default, 8)"},
		},
		"producer maxInFlightRequests": {
			mutate: func(c *Config) { c.Producer = &Producer{MaxInFlightRequests: 6} },
			want: []string{"producer.maxInFlightRequests: Invalid value: 6: must be between 1 and 5 (0: the default, 5); " +
				"Kafka keeps the idempotence state of the last 5 batches per partition"},
		},
		"producer producers negative": {
			mutate: func(c *Config) { c.Producer = &Producer{Producers: -1} },
			want:   []string{"producer.producers: Invalid value: -1: must be between 1 and 16 (0: the default, 8)"},
		},
		"producer max message bytes": {
			mutate: func(c *Config) { c.Producer = &Producer{MaxMessageBytes: 100} },
			want: []string{"producer.maxMessageBytes: Invalid value: 100: must be between 1024 and 104792064 bytes " +
				"(unset: the target topics' max.message.bytes)"},
		},
		"bootstrap servers without port": {
			mutate: func(c *Config) { c.Source.BootstrapServers = []string{"ok:1", "nohost", ":9092"} },
			want: []string{
				`source.bootstrapServers[1]: Invalid value: "nohost": must be host:port`,
				`source.bootstrapServers[2]: Invalid value: ":9092": must be host:port`,
			},
		},
		"tls cert without key": {
			mutate: func(c *Config) { c.Target.TLS = &TLS{CertFile: "/c.pem"} },
			want:   []string{`target.tls: Invalid value: "certFile/keyFile": certFile and keyFile must be set together`},
		},
		"client tuning out of range": {
			mutate: func(c *Config) {
				c.Producer = &Producer{Compression: "brotli", FlushBytes: -1}
				c.Consumer = &Consumer{FetchMaxWait: Duration{Duration: time.Minute}}
			},
			want: []string{
				`producer.compression: Unsupported value: "brotli": supported values: "none", "gzip", "snappy", "lz4", "zstd"`,
				"producer.flushBytes: Invalid value: -1: must be between 0 and 104792064",
				`consumer.fetchMaxWait: Invalid value: "1m0s": must be between 0 and 10s: a longer wait delays the drain before a rebalance`,
			},
		},
		"sasl unknown mechanism": {
			mutate: func(c *Config) { c.Source.SASL = &SASL{Mechanism: "GSSAPI"} },
			want: []string{
				`source.sasl.mechanism: Unsupported value: "GSSAPI": supported values: "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "AWS_MSK_IAM"`,
			},
		},
		"sasl scram incomplete": {
			mutate: func(c *Config) { c.Source.SASL = &SASL{Mechanism: SASLSCRAMSHA512} },
			want: []string{
				"source.sasl.username: Required value",
				"source.sasl.passwordFile: Required value: the file holding the password (credentials never go in this file)",
			},
		},
		"sasl oauthbearer without its client": {
			mutate: func(c *Config) { c.Target.SASL = &SASL{Mechanism: SASLOAuthBearer} },
			want:   []string{"target.sasl.oauth: Required value: tokenUrl, clientId and clientSecretFile of the OAuth client"},
		},
		"sasl oauthbearer incomplete": {
			mutate: func(c *Config) {
				c.Target.SASL = &SASL{Mechanism: SASLOAuthBearer, OAuth: &OAuth{TokenURL: "idp.example/token"}}
			},
			want: []string{
				`target.sasl.oauth.tokenUrl: Invalid value: "idp.example/token": must be an http(s) URL`,
				"target.sasl.oauth.clientId: Required value",
				"target.sasl.oauth.clientSecretFile: Required value: the file holding the client secret (credentials never go in this file)",
			},
		},
		"sasl msk iam without a region": {
			mutate: func(c *Config) {
				c.Source.SASL = &SASL{Mechanism: SASLAWSMSKIAM, AWS: &AWS{RoleARN: "arn:aws:iam::1:role/m"}}
			},
			want: []string{"source.sasl.aws.region: Required value: the MSK cluster's AWS region"},
		},
		"bad regexes in include and exclude": {
			mutate: func(c *Config) { c.Topics.Include = []string{"a", "b("}; c.Topics.Exclude = []string{"["} },
			want: []string{
				"topics.include[1]: Invalid value: \"b(\": error parsing regexp: missing closing ): `b(`",
				"topics.exclude[0]: Invalid value: \"[\": error parsing regexp: missing closing ]: `[`",
			},
		},
		"rename prefix and template": {
			mutate: func(c *Config) { c.Topics.Rename = &Rename{Prefix: "x.", Template: "y.{topic}"} },
			want:   []string{`topics.rename: Invalid value: "prefix+template": set one of prefix, template and stripPrefix`},
		},
		"rename template without topic": {
			mutate: func(c *Config) { c.Topics.Rename = &Rename{Template: "all"} },
			want:   []string{`topics.rename.template: Invalid value: "all": must contain {topic}, or every source topic would map to one target`},
		},
		"rename stripPrefix and prefix": {
			mutate: func(c *Config) { c.Topics.Rename = &Rename{StripPrefix: "dc1.", Prefix: "dc2."} },
			want:   []string{`topics.rename: Invalid value: "prefix+stripPrefix": set one of prefix, template and stripPrefix`},
		},
		"rename stripPrefix with bad characters": {
			mutate: func(c *Config) { c.Topics.Rename = &Rename{StripPrefix: "dc1/"} },
			want:   []string{`topics.rename.stripPrefix: Invalid value: "dc1/": may contain only letters, digits, '.', '_' and '-' (Kafka topic name characters)`},
		},
		"rename stripPrefix and an included name without it": {
			mutate: func(c *Config) {
				c.Topics.Include = []string{"dc1\\.orders\\..*", "dc1.payments", "payments"}
				c.Topics.Rename = &Rename{StripPrefix: "dc1."}
			},
			want: []string{`topics.include[2]: Invalid value: "payments": does not start with topics.rename.stripPrefix "dc1.": a topic without the prefix is never mirrored`},
		},
		"rename prefix with bad characters": {
			mutate: func(c *Config) { c.Topics.Rename = &Rename{Prefix: "dc 1/"} },
			want:   []string{`topics.rename.prefix: Invalid value: "dc 1/": may contain only letters, digits, '.', '_' and '-' (Kafka topic name characters)`},
		},
		"mirror loop": {
			mutate: func(c *Config) { c.Target.BootstrapServers = []string{"other:1", "SOURCE-KAFKA:9092"} },
			want:   []string{`target.bootstrapServers: Invalid value: ["other:1","SOURCE-KAFKA:9092"]: source and target are the same cluster and topics.rename is not set: the mirror would write into the topics it reads`},
		},
		"mirror loop with an identity template": {
			mutate: func(c *Config) {
				c.Target.BootstrapServers = c.Source.BootstrapServers
				c.Topics.Rename = &Rename{Template: "{topic}"}
			},
			want: []string{`target.bootstrapServers: Invalid value: ["source-kafka:9092"]: source and target are the same cluster and topics.rename is not set: the mirror would write into the topics it reads`},
		},
		"handlers": {
			mutate: func(c *Config) {
				c.Handlers = []HandlerSpec{
					{},
					{Name: "x", CEL: &CELHandler{Filter: "true", OnError: OnErrorFail}},
					{CEL: &CELHandler{OnError: OnErrorFail}},
					{CEL: &CELHandler{Filter: "true", OnError: "retry"}},
					{CEL: &CELHandler{Filter: "true", OnError: OnErrorSkip}, Args: map[string]string{"a": "b"}},
					{Name: "identity"},
				}
			},
			want: []string{
				"handlers[0]: Required value: set cel or name",
				`handlers[1]: Invalid value: "x": set cel or name, not both`,
				"handlers[2].cel: Required value: set filter and/or transform",
				`handlers[3].cel.onError: Unsupported value: "retry": supported values: "fail", "skip"`,
				"handlers[4].args: Forbidden: args are for named handlers",
			},
		},
		"listener without name": {
			mutate: func(c *Config) { c.RebalanceListener = &PluginSpec{Name: " "} },
			want:   []string{"rebalanceListener.name: Required value: the name of a registered rebalance listener"},
		},
		"replication factor": {
			mutate: func(c *Config) { c.Topics.ReplicationFactor = -2 },
			want:   []string{"topics.replicationFactor: Invalid value: -2: must be between 1 and 32767, or -1 (unset: the source topic's, capped at the target's broker count)"},
		},
		"replication factor too large": {
			mutate: func(c *Config) { c.Topics.ReplicationFactor = 40000 },
			want:   []string{"topics.replicationFactor: Invalid value: 40000: must be between 1 and 32767, or -1 (unset: the source topic's, capped at the target's broker count)"},
		},
		"replication factor -1, config exclude with an empty pattern": {
			mutate: func(c *Config) {
				c.Topics.ReplicationFactor = -1
				c.Topics.ConfigExclude = []string{`retention\..*`, ""}
			},
		},
		"config exclude": {
			mutate: func(c *Config) { c.Topics.ConfigExclude = []string{`ok`, `bad(`} },
			want:   []string{"topics.configExclude[1]: Invalid value: \"bad(\": error parsing regexp: missing closing ): `bad(`"},
		},
		"syncTopicConfigs off": {
			mutate: func(c *Config) { c.SyncTopicConfigs = BoolPtr(false) },
		},
		"delivery": {
			mutate: func(c *Config) { c.Delivery = "atMostOnce" },
			want:   []string{`delivery: Unsupported value: "atMostOnce": supported values: "atLeastOnce", "exactlyOnce"`},
		},
		"exactlyOnce with what it cannot keep per partition": {
			mutate: func(c *Config) {
				c.Delivery = DeliveryExactlyOnce
				c.Partitioning = PartitioningHash
				c.Handlers = []HandlerSpec{{CEL: &CELHandler{Filter: "true", OnError: OnErrorFail}}, {Name: "split"}}
				c.NoDataLoss = BoolPtr(false)
			},
			want: []string{
				`partitioning: Invalid value: "hash": delivery exactlyOnce needs partitioning preserve: its transactions and fencing are per source partition`,
				`handlers[1].name: Invalid value: "split": delivery exactlyOnce allows CEL handlers only: a named handler may fan a record out`,
				"noDataLoss: Invalid value: false: delivery exactlyOnce needs noDataLoss true",
			},
		},
		"exactlyOnce with groups and provenance": {
			mutate: func(c *Config) {
				c.Delivery = DeliveryExactlyOnce
				c.Groups = &Groups{Include: []string{"app"}, SyncInterval: Duration{Duration: time.Minute}}
				c.Provenance = &Provenance{Enabled: true, Header: "h", MaxHops: 3}
			},
		},
		"transactionInterval above the commit interval": {
			mutate: func(c *Config) {
				c.Delivery = DeliveryExactlyOnce
				c.TransactionInterval.Duration = 10 * time.Second
			},
			want: []string{`transactionInterval: Invalid value: "10s": must be at most offsetCommitInterval (5s)`},
		},
		"transactionInterval negative": {
			mutate: func(c *Config) {
				c.Delivery = DeliveryExactlyOnce
				c.TransactionInterval.Duration = -time.Second
			},
			want: []string{`transactionInterval: Invalid value: "-1s": must be a positive duration`},
		},
		"metrics address": {
			mutate: func(c *Config) { c.Metrics.Address = "8080" },
			want:   []string{`metrics.address: Invalid value: "8080": must be host:port or :port ("0" turns the endpoint off)`},
		},
		"provenance": {
			mutate: func(c *Config) {
				c.Provenance = &Provenance{Enabled: true, MaxHops: 101, SourceName: "dc,1", TargetName: "dc-2"}
			},
			want: []string{
				"provenance.header: Required value: the name of the provenance header",
				"provenance.maxHops: Invalid value: 101: must be between 1 and 100",
				`provenance.sourceName: Invalid value: "dc,1": may contain only letters, digits, '.', '_' and '-' (',' separates the ids in the header)`,
			},
		},
		"provenance names equal": {
			mutate: func(c *Config) {
				c.Provenance = &Provenance{Enabled: true, Header: "h", MaxHops: -1, SourceName: "dc1", TargetName: "dc1"}
			},
			want: []string{
				"provenance.maxHops: Invalid value: -1: must be between 1 and 100",
				`provenance.targetName: Invalid value: "dc1": must differ from sourceName: the names tell the clusters apart`,
			},
		},
		"provenance off is not checked": {
			mutate: func(c *Config) { c.Provenance = &Provenance{MaxHops: -1} },
		},
		"provenance does not admit writing into the topics read": {
			mutate: func(c *Config) {
				c.Target.BootstrapServers = c.Source.BootstrapServers
				c.Provenance = &Provenance{Enabled: true, Header: DefaultProvenanceHeader, MaxHops: 1}
			},
			want: []string{`target.bootstrapServers: Invalid value: ["source-kafka:9092"]: source and target are the same cluster and topics.rename is not set: the mirror would write into the topics it reads`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := validConfig(t)
			tc.mutate(c)
			var got []string
			for _, e := range c.ValidateFields(nil) {
				got = append(got, e.Error())
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("errors =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// The operator roots paths at its resource's spec.
func TestValidateFieldsRoot(t *testing.T) {
	c := validConfig(t)
	c.Streams = 0
	c.Topics.Include = []string{"("}
	errs := c.ValidateFields(nil)
	rooted := c.ValidateFields(field.NewPath("spec"))
	if len(errs) != 2 || len(rooted) != 2 {
		t.Fatalf("errors %v / %v", errs, rooted)
	}
	for i := range errs {
		if rooted[i].Field != "spec."+errs[i].Field {
			t.Errorf("rooted field %q, want spec.%s", rooted[i].Field, errs[i].Field)
		}
	}
}

// A defaulted config renders (as the operator writes it into the ConfigMap) and parses
// back to the same config, and defaulting twice changes nothing.
func TestMarshalRoundTrip(t *testing.T) {
	withSASL := strings.Replace(minimal, "source: {bootstrapServers: [\"source-kafka:9092\"]}",
		"source: {bootstrapServers: [\"source-kafka:9092\"], tls: {caFiles: []}, sasl: {mechanism: OAUTHBEARER, "+
			"oauth: {tokenUrl: \"https://idp/token\", clientId: c, clientSecretFile: /s, scopes: [], extensions: {}}}}", 1)
	for name, y := range map[string]string{
		"minimal":   minimal,
		"canonical": canonical,
		// Empty lists and maps that Marshal leaves out must read back the same (FuzzParse
		// found `handlers: []` and then `exclude: []` turning into nil lists).
		"empty handlers":            minimal + "handlers: []\n",
		"empty exclude":             strings.Replace(minimal, `topics: {include: ["orders\\..*"]}`, `topics: {include: ["orders\\..*"], exclude: []}`, 1),
		"empty handler args":        minimal + "handlers: [{name: identity, args: {}}]\n",
		"empty listener args":       minimal + "rebalanceListener: {name: log, args: {}}\n",
		"empty groups exclude":      minimal + "groups: {include: [\"app-.*\"], exclude: []}\n",
		"empty tls and oauth lists": withSASL,
		// An empty configExclude means "copy every config": it must not turn into the
		// default list in the pod.
		"empty configExclude": strings.Replace(minimal, `topics: {include: ["orders\\..*"]}`, `topics: {include: ["orders\\..*"], configExclude: []}`, 1),
	} {
		t.Run(name, func(t *testing.T) {
			c, err := Parse([]byte(y))
			if err != nil {
				t.Fatal(err)
			}
			again := *c
			again.Default()
			if !reflect.DeepEqual(&again, c) {
				t.Fatalf("Default is not idempotent:\n%+v\n%+v", &again, c)
			}
			out, err := Marshal(c)
			if err != nil {
				t.Fatal(err)
			}
			back, err := Parse(out)
			if err != nil {
				t.Fatalf("Parse(Marshal(c)): %v\n%s", err, out)
			}
			if !reflect.DeepEqual(back, c) {
				t.Fatalf("round trip changed the config:\n%s\n%+v\n%+v", out, back, c)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "mirror.yaml")
	if err := os.WriteFile(good, []byte(minimal), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(good)
	if err != nil || c.ConsumerGroup != "kafka-mirror.default.orders" {
		t.Fatalf("Load = %+v, %v", c, err)
	}
	bad := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(bad, []byte(minimal+"streams: 100\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(bad)
	if want := bad + ": invalid mirror config: streams: Invalid value: 100: must be between 1 and 64"; err == nil || err.Error() != want {
		t.Fatalf("error = %v, want %q", err, want)
	}
	_, err = Load(filepath.Join(dir, "missing.yaml"))
	if want := "while reading the mirror config: open " + filepath.Join(dir, "missing.yaml") + ": no such file or directory"; err == nil || err.Error() != want {
		t.Fatalf("error = %v, want %q", err, want)
	}
}

func TestTargetTopic(t *testing.T) {
	tests := map[string]struct {
		rename *Rename
		want   string
	}{
		"nil":      {rename: nil, want: "orders"},
		"prefix":   {rename: &Rename{Prefix: "dc1."}, want: "dc1.orders"},
		"template": {rename: &Rename{Template: "{topic}.mirror.{topic}"}, want: "orders.mirror.orders"},
		"empty":    {rename: &Rename{}, want: "orders"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.rename.TargetTopic("orders"); got != tc.want {
				t.Fatalf("TargetTopic = %q, want %q", got, tc.want)
			}
		})
	}
}
