package controllers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/admissioncases"
)

// celMirror is a valid KafkaMirror in a namespace no manager watches: these tests are
// about what the API server admits.
func celMirror(name string, mutate func(*v1alpha1.KafkaMirror)) *v1alpha1.KafkaMirror {
	return admissioncases.Mirror("t-cel", name, mutate)
}

// TestAdmissionRejects: every rule of the schema rejects its invalid object at apply
// time with its exact message, at its field. The same cases are fed to the offline
// `kafka-mirror validate -f` (cmd_validate_admission_test.go), which must agree.
func TestAdmissionRejects(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	for name, tc := range admissioncases.Rejected() {
		t.Run(name, func(t *testing.T) {
			m := celMirror("rejected", tc.Mutate)
			err := env.client.Create(context.Background(), m)
			if err == nil {
				_ = env.client.Delete(context.Background(), m)
				t.Fatalf("the API server accepted it")
			}
			if !strings.Contains(err.Error(), tc.Message) || !strings.Contains(err.Error(), tc.Field) {
				t.Fatalf("rejected with\n  %v\nwant the message\n  %s\nat %s", err, tc.Message, tc.Field)
			}
		})
	}
}

// TestAdmissionRejectsRaw: what the Go type cannot send (an explicit zero, a misspelt
// field, a wrong type) is rejected too, with kubectl's strict field validation.
func TestAdmissionRejectsRaw(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	for name, tc := range admissioncases.RejectedRaw() {
		t.Run(name, func(t *testing.T) {
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(admissioncases.RawMirror("t-cel", "rejected-raw", tc.Spec)), &u.Object); err != nil {
				t.Fatal(err)
			}
			err := env.client.Create(context.Background(), u, client.FieldValidation(metav1.FieldValidationStrict))
			if err == nil {
				_ = env.client.Delete(context.Background(), u)
				t.Fatalf("the API server accepted it")
			}
			if !strings.Contains(err.Error(), tc.Message) || !strings.Contains(err.Error(), tc.Field) {
				t.Fatalf("rejected with\n  %v\nwant the message\n  %s\nat %s", err, tc.Message, tc.Field)
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

// TestProducerPoolBoundsAdmitted: spec.producer.producers takes the engine's bounds,
// 1 and 16 included, and keeps the value as written.
func TestProducerPoolBoundsAdmitted(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	for _, n := range []int32{1, 16} {
		m := celMirror(fmt.Sprintf("producers-%d", n), func(m *v1alpha1.KafkaMirror) {
			m.Spec.Producer = &v1alpha1.ProducerSpec{Producers: n}
		})
		if err := env.client.Create(context.Background(), m); err != nil {
			t.Fatalf("producers %d rejected: %v", n, err)
		}
		got := &v1alpha1.KafkaMirror{}
		if err := env.client.Get(context.Background(), client.ObjectKeyFromObject(m), got); err != nil {
			t.Fatal(err)
		}
		if got.Spec.Producer == nil || got.Spec.Producer.Producers != n {
			t.Fatalf("producers %d stored as %+v", n, got.Spec.Producer)
		}
		_ = env.client.Delete(context.Background(), m)
	}
}
