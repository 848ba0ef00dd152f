package controllers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
)

// celMirror is a valid KafkaMirror in a namespace no manager watches: these tests are
// about what the API server admits.
func celMirror(name string, mutate func(*v1alpha1.KafkaMirror)) *v1alpha1.KafkaMirror {
	m := &v1alpha1.KafkaMirror{
		ObjectMeta: metav1.ObjectMeta{Namespace: "t-cel", Name: name},
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

// TestAdmissionRejects: every rule of the schema rejects its invalid object at apply
// time with its exact message, at its field.
func TestAdmissionRejects(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	sasl := func(m *v1alpha1.KafkaMirror) *v1alpha1.SASLSpec {
		m.Spec.Source.SASL = &v1alpha1.SASLSpec{Mechanism: v1alpha1.SASLSCRAMSHA512, Username: "mirror",
			PasswordSecretRef: &v1alpha1.SecretKeyReference{Name: "creds"}}
		return m.Spec.Source.SASL
	}
	tests := map[string]struct {
		mutate  func(*v1alpha1.KafkaMirror)
		field   string
		message string
	}{
		"empty bootstrap servers": {
			mutate:  func(m *v1alpha1.KafkaMirror) { m.Spec.Source.BootstrapServers = []string{} },
			field:   "spec.source.bootstrapServers",
			message: "bootstrapServers must list at least one host:port",
		},
		"bootstrap server without port": {
			mutate:  func(m *v1alpha1.KafkaMirror) { m.Spec.Target.BootstrapServers = []string{"kafka"} },
			field:   "spec.target.bootstrapServers",
			message: "each bootstrap server must be host:port, for example kafka:9092",
		},
		"source is target without rename (mirror loop)": {
			mutate: func(m *v1alpha1.KafkaMirror) {
				m.Spec.Target.BootstrapServers = []string{"other:9092", "SOURCE-kafka:9092"}
			},
			field:   "spec",
			message: "source and target are the same cluster and topics.rename is not set: the mirror would write into the topics it reads (a mirror loop); set topics.rename.prefix or topics.rename.template",
		},
		"source is target with an identity template": {
			mutate: func(m *v1alpha1.KafkaMirror) {
				m.Spec.Target = m.Spec.Source
				m.Spec.Topics.Rename = &v1alpha1.RenameSpec{Template: "{topic}"}
			},
			field:   "spec",
			message: "source and target are the same cluster and topics.rename is not set",
		},
		"negative replicas": {
			mutate:  func(m *v1alpha1.KafkaMirror) { m.Spec.Replicas = ptr.To[int32](-1) },
			field:   "spec.replicas",
			message: "replicas must be 0 or more",
		},
		"negative streams": {
			mutate:  func(m *v1alpha1.KafkaMirror) { m.Spec.Streams = -2 },
			field:   "spec.streams",
			message: "streams must be between 1 and 64",
		},
		"65 streams": {
			mutate:  func(m *v1alpha1.KafkaMirror) { m.Spec.Streams = 65 },
			field:   "spec.streams",
			message: "streams must be between 1 and 64",
		},
		"unknown partitioning": {
			mutate:  func(m *v1alpha1.KafkaMirror) { m.Spec.Partitioning = "sticky" },
			field:   "spec.partitioning",
			message: `Unsupported value: "sticky": supported values: "preserve", "hash", "roundRobin"`,
		},
		"SASL without a Secret": {
			mutate:  func(m *v1alpha1.KafkaMirror) { sasl(m).PasswordSecretRef = nil },
			field:   "spec.source.sasl",
			message: "sasl.passwordSecretRef is required: the SASL password is read from a Secret, never written in the KafkaMirror",
		},
		"unknown SASL mechanism": {
			mutate:  func(m *v1alpha1.KafkaMirror) { sasl(m).Mechanism = "GSSAPI" },
			field:   "spec.source.sasl.mechanism",
			message: `Unsupported value: "GSSAPI": supported values: "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"`,
		},
		"rename with prefix and template": {
			mutate: func(m *v1alpha1.KafkaMirror) {
				m.Spec.Topics.Rename = &v1alpha1.RenameSpec{Prefix: "a.", Template: "b.{topic}"}
			},
			field:   "spec.topics.rename",
			message: "set rename.prefix or rename.template, not both",
		},
		"rename template without {topic}": {
			mutate:  func(m *v1alpha1.KafkaMirror) { m.Spec.Topics.Rename = &v1alpha1.RenameSpec{Template: "all-in-one"} },
			field:   "spec.topics.rename.template",
			message: "rename.template must contain {topic}, or every source topic would map to one target topic",
		},
		"handler with cel and name": {
			mutate: func(m *v1alpha1.KafkaMirror) {
				m.Spec.Handlers = []v1alpha1.HandlerSpec{{Name: "x", CEL: &v1alpha1.CELHandler{Filter: "true"}}}
			},
			field:   "spec.handlers[0]",
			message: "set either cel or name in each handler",
		},
		"empty handler": {
			mutate:  func(m *v1alpha1.KafkaMirror) { m.Spec.Handlers = []v1alpha1.HandlerSpec{{}} },
			field:   "spec.handlers[0]",
			message: "set either cel or name in each handler",
		},
		"cel handler without expressions": {
			mutate:  func(m *v1alpha1.KafkaMirror) { m.Spec.Handlers = []v1alpha1.HandlerSpec{{CEL: &v1alpha1.CELHandler{}}} },
			field:   "spec.handlers[0].cel",
			message: "a cel handler needs a filter and/or a transform",
		},
		"cel handler with args": {
			mutate: func(m *v1alpha1.KafkaMirror) {
				m.Spec.Handlers = []v1alpha1.HandlerSpec{{CEL: &v1alpha1.CELHandler{Filter: "true"}, Args: map[string]string{"a": "b"}}}
			},
			field:   "spec.handlers[0]",
			message: "args are for named handlers; a cel handler takes none",
		},
		"topic sync interval below 1s": {
			mutate:  func(m *v1alpha1.KafkaMirror) { m.Spec.TopicSyncInterval = &metav1.Duration{Duration: 100 * 1e6} },
			field:   "spec.topicSyncInterval",
			message: "topicSyncInterval must be a duration of at least 1s, such as 30s or 5m",
		},
		"negative commit interval": {
			mutate:  func(m *v1alpha1.KafkaMirror) { m.Spec.OffsetCommitInterval = &metav1.Duration{Duration: -1e9} },
			field:   "spec.offsetCommitInterval",
			message: "offsetCommitInterval must be a positive duration such as 5s",
		},
		"name too long for its children": {
			mutate:  func(m *v1alpha1.KafkaMirror) { m.Name = strings.Repeat("n", 49) },
			message: "metadata.name must be at most 48 characters, so that the names of the mirror's Deployment and Service stay within 63",
		},
		"no include": {
			mutate:  func(m *v1alpha1.KafkaMirror) { m.Spec.Topics.Include = []string{} },
			field:   "spec.topics.include",
			message: "should have at least 1 items",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m := celMirror("rejected", tc.mutate)
			err := env.client.Create(context.Background(), m)
			if err == nil {
				_ = env.client.Delete(context.Background(), m)
				t.Fatalf("the API server accepted it")
			}
			if !strings.Contains(err.Error(), tc.message) || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("rejected with\n  %v\nwant the message\n  %s\nat %s", err, tc.message, tc.field)
			}
		})
	}
}

func TestConsumerGroupIsImmutable(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	const message = "consumerGroup is immutable: it cannot be set, changed or removed after creation, because the mirror's committed offsets live in that group"
	tests := map[string]struct {
		initial, updated string
		wantErr          bool
	}{
		"changed":            {initial: "group-a", updated: "group-b", wantErr: true},
		"removed":            {initial: "group-a", updated: "", wantErr: true},
		"set after the fact": {initial: "", updated: "group-b", wantErr: true},
		"kept":               {initial: "group-a", updated: "group-a"},
		"left to default":    {initial: "", updated: ""},
	}
	i := 0
	for name, tc := range tests {
		i++
		m := celMirror("group-"+string(rune('a'+i)), func(m *v1alpha1.KafkaMirror) { m.Spec.ConsumerGroup = tc.initial })
		t.Run(name, func(t *testing.T) {
			create(t, m)
			m.Spec.ConsumerGroup = tc.updated
			m.Spec.Streams = 2 // a change that is always allowed
			err := env.client.Update(context.Background(), m)
			switch {
			case tc.wantErr && (err == nil || !strings.Contains(err.Error(), message)):
				t.Fatalf("update returned %v, want %q", err, message)
			case !tc.wantErr && err != nil:
				t.Fatalf("update rejected: %v", err)
			}
		})
	}
}

// TestSamplesAreAdmitted: every sample in config/samples is accepted as written, with
// the defaults the schema declares.
func TestSamplesAreAdmitted(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	files, err := filepath.Glob("../config/samples/kafkamirror_v1alpha1_*.yaml")
	if err != nil || len(files) < 4 {
		t.Fatalf("want at least 4 samples, found %v (err %v)", files, err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i, doc := range strings.Split(string(data), "\n---\n") {
			t.Run(fmt.Sprintf("%s#%d", filepath.Base(f), i), func(t *testing.T) {
				m := &v1alpha1.KafkaMirror{}
				if err := yaml.UnmarshalStrict([]byte(doc), m); err != nil {
					t.Fatalf("the sample does not parse strictly: %v", err)
				}
				m.Namespace = "t-cel"
				if err := env.client.Create(context.Background(), m); err != nil {
					t.Fatalf("the API server rejects the sample: %v", err)
				}
				if m.Spec.Replicas == nil || *m.Spec.Replicas < 1 || m.Spec.Partitioning == "" || m.Spec.Streams < 1 ||
					m.Spec.NoDataLoss == nil || m.Spec.TopicSyncInterval == nil {
					t.Fatalf("defaults not applied: %+v", m.Spec)
				}
				if _, err := validate(m); err != nil {
					t.Fatalf("the operator would stall the sample: %v", err)
				}
			})
		}
	}
}
