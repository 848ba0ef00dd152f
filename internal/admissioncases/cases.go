// Package admissioncases holds the KafkaMirror objects that the API server must reject,
// each with the field and message of its rejection. The envtest admission test
// (controllers) sends them to a real kube-apiserver and the offline `kafka-mirror
// validate -f` test (package main) feeds them to the command, so both judge exactly the
// same cases with the same verdicts.
package admissioncases

import (
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
)

// Case is one object the API server rejects: a valid Mirror changed by Mutate (or, for
// a Raw case, the YAML spec that a typed object cannot express, such as an explicit 0),
// rejected with Message at Field.
type Case struct {
	Mutate  func(*v1alpha1.KafkaMirror)
	Field   string
	Message string
}

// RawCase is a KafkaMirror whose spec is written as YAML, for what the Go type cannot
// send: an explicit zero that omitempty drops, or a field the schema does not know.
type RawCase struct {
	// Spec is the whole spec, as a YAML flow mapping or block.
	Spec    string
	Field   string
	Message string
}

// Mirror is a valid KafkaMirror (the base of every case), changed by mutate when given.
func Mirror(namespace, name string, mutate func(*v1alpha1.KafkaMirror)) *v1alpha1.KafkaMirror {
	m := &v1alpha1.KafkaMirror{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "KafkaMirror"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: v1alpha1.KafkaMirrorSpec{
			Source: v1alpha1.ClusterSpec{BootstrapServers: []string{"source-kafka:9092"}},
			Target: v1alpha1.ClusterSpec{BootstrapServers: []string{"target-kafka:9092"}},
			Topics: v1alpha1.TopicsSpec{Include: []string{`orders\..*`}},
		},
	}
	if mutate != nil {
		mutate(m)
	}
	return m
}

// RawMirror is the YAML document of a KafkaMirror with the given spec.
func RawMirror(namespace, name, spec string) string {
	return "apiVersion: " + v1alpha1.GroupVersion.String() + "\nkind: KafkaMirror\nmetadata: {name: " + name +
		", namespace: " + namespace + "}\nspec: " + spec + "\n"
}

// Rejected lists the typed cases by name.
func Rejected() map[string]Case {
	sasl := func(m *v1alpha1.KafkaMirror) *v1alpha1.SASLSpec {
		m.Spec.Source.SASL = &v1alpha1.SASLSpec{Mechanism: v1alpha1.SASLSCRAMSHA512, Username: "mirror",
			PasswordSecretRef: &v1alpha1.SecretKeyReference{Name: "creds"}}
		return m.Spec.Source.SASL
	}
	return map[string]Case{
		"failback without provenance": {
			Mutate: func(m *v1alpha1.KafkaMirror) {
				m.Spec.InitialPositions = &v1alpha1.InitialPositionsSpec{FromFailover: "orders"}
			},
			Field:   "spec.provenance.enabled",
			Message: "initialPositions.fromFailover needs provenance.enabled: true",
		},
		"failback with provenance off": {
			Mutate: func(m *v1alpha1.KafkaMirror) {
				m.Spec.Provenance = &v1alpha1.ProvenanceSpec{Header: "hops"}
				m.Spec.InitialPositions = &v1alpha1.InitialPositionsSpec{FromFailover: "orders"}
			},
			Field:   "spec.provenance.enabled",
			Message: "initialPositions.fromFailover needs provenance.enabled: true",
		},
		"failback from itself": {
			Mutate: func(m *v1alpha1.KafkaMirror) {
				m.Spec.Provenance = &v1alpha1.ProvenanceSpec{Enabled: true}
				m.Spec.InitialPositions = &v1alpha1.InitialPositionsSpec{FromFailover: m.Name}
			},
			Field:   "spec.initialPositions.fromFailover",
			Message: "initialPositions.fromFailover names this KafkaMirror itself",
		},
		"failover timeout of zero": {
			Mutate: func(m *v1alpha1.KafkaMirror) {
				m.Spec.Failover = &v1alpha1.FailoverSpec{Mode: "planned", Timeout: &metav1.Duration{}}
			},
			Field:   "spec.failover.timeout",
			Message: "failover.timeout must be a positive duration such as 10m",
		},
		"empty bootstrap servers": {
			Mutate:  func(m *v1alpha1.KafkaMirror) { m.Spec.Source.BootstrapServers = []string{} },
			Field:   "spec.source.bootstrapServers",
			Message: "bootstrapServers must list at least one host:port",
		},
		"bootstrap server without port": {
			Mutate:  func(m *v1alpha1.KafkaMirror) { m.Spec.Target.BootstrapServers = []string{"kafka"} },
			Field:   "spec.target.bootstrapServers",
			Message: "each bootstrap server must be host:port, for example kafka:9092",
		},
		"source is target without rename (mirror loop)": {
			Mutate: func(m *v1alpha1.KafkaMirror) {
				m.Spec.Target.BootstrapServers = []string{"other:9092", "SOURCE-kafka:9092"}
			},
			Field:   "spec",
			Message: "source and target are the same cluster and topics.rename is not set: the mirror would write into the topics it reads (a mirror loop); set topics.rename.prefix or topics.rename.template",
		},
		"source is target with an identity template": {
			Mutate: func(m *v1alpha1.KafkaMirror) {
				m.Spec.Target = m.Spec.Source
				m.Spec.Topics.Rename = &v1alpha1.RenameSpec{Template: "{topic}"}
			},
			Field:   "spec",
			Message: "source and target are the same cluster and topics.rename is not set",
		},
		"negative replicas": {
			Mutate:  func(m *v1alpha1.KafkaMirror) { m.Spec.Replicas = ptr.To[int32](-1) },
			Field:   "spec.replicas",
			Message: "replicas must be 0 or more",
		},
		"negative streams": {
			Mutate:  func(m *v1alpha1.KafkaMirror) { m.Spec.Streams = -2 },
			Field:   "spec.streams",
			Message: "streams must be between 1 and 64",
		},
		"65 streams": {
			Mutate:  func(m *v1alpha1.KafkaMirror) { m.Spec.Streams = 65 },
			Field:   "spec.streams",
			Message: "streams must be between 1 and 64",
		},
		"unknown partitioning": {
			Mutate:  func(m *v1alpha1.KafkaMirror) { m.Spec.Partitioning = "sticky" },
			Field:   "spec.partitioning",
			Message: `Unsupported value: "sticky": supported values: "preserve", "hash", "roundRobin"`,
		},
		"groups with hash partitioning": {
			Mutate: func(m *v1alpha1.KafkaMirror) {
				m.Spec.Partitioning = "hash"
				m.Spec.Groups = &v1alpha1.GroupsSpec{Include: []string{"app"}}
			},
			Field:   "spec",
			Message: "groups (consumer-group offset translation) needs partitioning: preserve",
		},
		"groups with a named handler": {
			Mutate: func(m *v1alpha1.KafkaMirror) {
				m.Spec.Handlers = []v1alpha1.HandlerSpec{{Name: "fanout"}}
				m.Spec.Groups = &v1alpha1.GroupsSpec{Include: []string{"app"}}
			},
			Field:   "spec",
			Message: "groups (consumer-group offset translation) needs one target record per source record; a named handler may fan a record out",
		},
		"groups without include": {
			Mutate:  func(m *v1alpha1.KafkaMirror) { m.Spec.Groups = &v1alpha1.GroupsSpec{Include: []string{}} },
			Field:   "spec.groups.include",
			Message: "should have at least 1 items",
		},
		"groups syncInterval below 1s": {
			Mutate: func(m *v1alpha1.KafkaMirror) {
				m.Spec.Groups = &v1alpha1.GroupsSpec{Include: []string{"app"}, SyncInterval: &metav1.Duration{Duration: 100 * 1e6}}
			},
			Field:   "spec.groups.syncInterval",
			Message: "groups.syncInterval must be a duration of at least 1s, such as 30s",
		},
		"SASL without a Secret": {
			Mutate:  func(m *v1alpha1.KafkaMirror) { sasl(m).PasswordSecretRef = nil },
			Field:   "spec.source.sasl",
			Message: "sasl.passwordSecretRef is required: the SASL password is read from a Secret, never written in the KafkaMirror",
		},
		"unknown SASL mechanism": {
			Mutate:  func(m *v1alpha1.KafkaMirror) { sasl(m).Mechanism = "GSSAPI" },
			Field:   "spec.source.sasl.mechanism",
			Message: `Unsupported value: "GSSAPI": supported values: "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "AWS_MSK_IAM"`,
		},
		"autoscaling minReplicas above maxReplicas": {
			Mutate: func(m *v1alpha1.KafkaMirror) {
				m.Spec.Autoscaling = &v1alpha1.AutoscalingSpec{MinReplicas: ptr.To[int32](3), MaxReplicas: 2}
			},
			Field:   "spec.autoscaling",
			Message: "autoscaling.minReplicas must be at most autoscaling.maxReplicas",
		},
		"autoscaling maxReplicas above the cap": {
			Mutate:  func(m *v1alpha1.KafkaMirror) { m.Spec.Autoscaling = &v1alpha1.AutoscalingSpec{MaxReplicas: 257} },
			Field:   "spec.autoscaling.maxReplicas",
			Message: "should be less than or equal to 256",
		},
		"autoscaling targetCatchUp under 10s": {
			Mutate: func(m *v1alpha1.KafkaMirror) {
				m.Spec.Autoscaling = &v1alpha1.AutoscalingSpec{MaxReplicas: 4, TargetCatchUp: &metav1.Duration{Duration: 5 * time.Second}}
			},
			Field:   "spec.autoscaling.targetCatchUp",
			Message: "autoscaling.targetCatchUp must be a duration of at least 10s, such as 5m",
		},
		"SCRAM without a username": {
			Mutate:  func(m *v1alpha1.KafkaMirror) { sasl(m).Username = "" },
			Field:   "spec.source.sasl",
			Message: "sasl.username is required for PLAIN and SCRAM",
		},
		"OAUTHBEARER without its client": {
			Mutate:  func(m *v1alpha1.KafkaMirror) { *sasl(m) = v1alpha1.SASLSpec{Mechanism: v1alpha1.SASLOAuthBearer} },
			Field:   "spec.source.sasl",
			Message: "sasl.oauth is required for OAUTHBEARER",
		},
		"AWS_MSK_IAM without a region": {
			Mutate:  func(m *v1alpha1.KafkaMirror) { *sasl(m) = v1alpha1.SASLSpec{Mechanism: v1alpha1.SASLAWSMSKIAM} },
			Field:   "spec.source.sasl",
			Message: "sasl.aws is required for AWS_MSK_IAM",
		},
		"OAuth token URL that is not http(s)": {
			Mutate: func(m *v1alpha1.KafkaMirror) {
				*sasl(m) = v1alpha1.SASLSpec{Mechanism: v1alpha1.SASLOAuthBearer, OAuth: &v1alpha1.OAuthSpec{
					TokenURL: "ftp://idp", ClientID: "mirror", ClientSecretRef: v1alpha1.SecretKeyReference{Name: "idp"}}}
			},
			Field:   "spec.source.sasl.oauth.tokenUrl",
			Message: "should match",
		},
		"rename with prefix and template": {
			Mutate: func(m *v1alpha1.KafkaMirror) {
				m.Spec.Topics.Rename = &v1alpha1.RenameSpec{Prefix: "a.", Template: "b.{topic}"}
			},
			Field:   "spec.topics.rename",
			Message: "set rename.prefix or rename.template, not both",
		},
		"rename template without {topic}": {
			Mutate:  func(m *v1alpha1.KafkaMirror) { m.Spec.Topics.Rename = &v1alpha1.RenameSpec{Template: "all-in-one"} },
			Field:   "spec.topics.rename.template",
			Message: "rename.template must contain {topic}, or every source topic would map to one target topic",
		},
		"replication factor zero": {
			Mutate:  func(m *v1alpha1.KafkaMirror) { m.Spec.Topics.ReplicationFactor = ptr.To[int32](0) },
			Field:   "spec.topics.replicationFactor",
			Message: "replicationFactor must be at least 1, or -1 for the source topic's",
		},
		"replication factor below -1": {
			Mutate:  func(m *v1alpha1.KafkaMirror) { m.Spec.Topics.ReplicationFactor = ptr.To[int32](-2) },
			Field:   "spec.topics.replicationFactor",
			Message: "should be greater than or equal to -1",
		},
		"handler with cel and name": {
			Mutate: func(m *v1alpha1.KafkaMirror) {
				m.Spec.Handlers = []v1alpha1.HandlerSpec{{Name: "x", CEL: &v1alpha1.CELHandler{Filter: "true"}}}
			},
			Field:   "spec.handlers[0]",
			Message: "set either cel or name in each handler",
		},
		"empty handler": {
			Mutate:  func(m *v1alpha1.KafkaMirror) { m.Spec.Handlers = []v1alpha1.HandlerSpec{{}} },
			Field:   "spec.handlers[0]",
			Message: "set either cel or name in each handler",
		},
		"cel handler without expressions": {
			Mutate:  func(m *v1alpha1.KafkaMirror) { m.Spec.Handlers = []v1alpha1.HandlerSpec{{CEL: &v1alpha1.CELHandler{}}} },
			Field:   "spec.handlers[0].cel",
			Message: "a cel handler needs a filter and/or a transform",
		},
		"cel handler with args": {
			Mutate: func(m *v1alpha1.KafkaMirror) {
				m.Spec.Handlers = []v1alpha1.HandlerSpec{{CEL: &v1alpha1.CELHandler{Filter: "true"}, Args: map[string]string{"a": "b"}}}
			},
			Field:   "spec.handlers[0]",
			Message: "args are for named handlers; a cel handler takes none",
		},
		"topic sync interval below 1s": {
			Mutate:  func(m *v1alpha1.KafkaMirror) { m.Spec.TopicSyncInterval = &metav1.Duration{Duration: 100 * 1e6} },
			Field:   "spec.topicSyncInterval",
			Message: "topicSyncInterval must be a duration of at least 1s, such as 30s or 5m",
		},
		"negative commit interval": {
			Mutate:  func(m *v1alpha1.KafkaMirror) { m.Spec.OffsetCommitInterval = &metav1.Duration{Duration: -1e9} },
			Field:   "spec.offsetCommitInterval",
			Message: "offsetCommitInterval must be a positive duration such as 5s",
		},
		"name too long for its children": {
			Mutate:  func(m *v1alpha1.KafkaMirror) { m.Name = strings.Repeat("n", 49) },
			Message: "metadata.name must be at most 48 characters, so that the names of the mirror's Deployment and Service stay within 63",
		},
		"unknown initialOffset": {
			Mutate:  func(m *v1alpha1.KafkaMirror) { m.Spec.InitialOffset = "earliest" },
			Field:   "spec.initialOffset",
			Message: `Unsupported value: "earliest": supported values: "oldest", "latest"`,
		},
		"negative maxMessageBytes": {
			Mutate:  func(m *v1alpha1.KafkaMirror) { m.Spec.Producer = &v1alpha1.ProducerSpec{MaxMessageBytes: -1} },
			Field:   "spec.producer.maxMessageBytes",
			Message: "should be greater than or equal to 1",
		},
		"too many producers": {
			Mutate:  func(m *v1alpha1.KafkaMirror) { m.Spec.Producer = &v1alpha1.ProducerSpec{Producers: 17} },
			Field:   "spec.producer.producers",
			Message: "producer.producers must be between 1 and 16",
		},
		"negative producers": {
			Mutate:  func(m *v1alpha1.KafkaMirror) { m.Spec.Producer = &v1alpha1.ProducerSpec{Producers: -1} },
			Field:   "spec.producer.producers",
			Message: "producer.producers must be between 1 and 16",
		},
		"unknown delivery": {
			Mutate:  func(m *v1alpha1.KafkaMirror) { m.Spec.Delivery = "atMostOnce" },
			Field:   "spec.delivery",
			Message: `Unsupported value: "atMostOnce": supported values: "atLeastOnce", "exactlyOnce"`,
		},
		"exactlyOnce with hash partitioning": {
			Mutate: func(m *v1alpha1.KafkaMirror) {
				m.Spec.Delivery = "exactlyOnce"
				m.Spec.Partitioning = v1alpha1.PartitioningHash
			},
			Field:   "spec",
			Message: "delivery exactlyOnce needs partitioning preserve: its transactions and fencing are per source partition",
		},
		"exactlyOnce with a named handler": {
			Mutate: func(m *v1alpha1.KafkaMirror) {
				m.Spec.Delivery = "exactlyOnce"
				m.Spec.Handlers = []v1alpha1.HandlerSpec{{Name: "split"}}
			},
			Field:   "spec",
			Message: "delivery exactlyOnce allows CEL handlers only: a named handler may fan a record out",
		},
		"transactionInterval above the commit interval": {
			Mutate: func(m *v1alpha1.KafkaMirror) {
				m.Spec.OffsetCommitInterval = &metav1.Duration{Duration: 1e9}
				m.Spec.TransactionInterval = &metav1.Duration{Duration: 2e9}
			},
			Field:   "spec",
			Message: "transactionInterval must be at most offsetCommitInterval",
		},
		"no include": {
			Mutate:  func(m *v1alpha1.KafkaMirror) { m.Spec.Topics.Include = []string{} },
			Field:   "spec.topics.include",
			Message: "should have at least 1 items",
		},
	}
}

// rawBase is the valid spec the raw cases change.
const rawBase = `{source: {bootstrapServers: ["source-kafka:9092"]}, target: {bootstrapServers: ["target-kafka:9092"]}, topics: {include: ["orders"]}`

// RejectedRaw lists the YAML cases by name.
func RejectedRaw() map[string]RawCase {
	return map[string]RawCase{
		"zero streams": {
			Spec:    rawBase + `, streams: 0}`,
			Field:   "spec.streams",
			Message: "streams must be between 1 and 64",
		},
		"zero producers": {
			Spec:    rawBase + `, producer: {producers: 0}}`,
			Field:   "spec.producer.producers",
			Message: "producer.producers must be between 1 and 16",
		},
		"a misspelt field": {
			Spec:    rawBase + `, replica: 2}`,
			Field:   "spec.replica",
			Message: `unknown field "spec.replica"`,
		},
		"streams as a string": {
			Spec:    rawBase + `, streams: "4"}`,
			Field:   "spec.streams",
			Message: `spec.streams in body must be of type integer: "string"`,
		},
	}
}
