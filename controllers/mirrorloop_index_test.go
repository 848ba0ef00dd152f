package controllers

import (
	"context"
	"sort"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
)

// TestLoopCandidatesFromTheIndex: with the source-server index (as under the manager),
// the loop check looks only at KafkaMirrors, in any namespace, whose source shares a
// bootstrap server with this one's target, compared without case as
// config.Cluster.SameClusterAs does; without the index it looks at all of them.
func TestLoopCandidatesFromTheIndex(t *testing.T) {
	km := func(ns, name, from string, to ...string) *v1alpha1.KafkaMirror {
		return &v1alpha1.KafkaMirror{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1alpha1.KafkaMirrorSpec{
				Source: v1alpha1.ClusterSpec{BootstrapServers: []string{from}},
				Target: v1alpha1.ClusterSpec{BootstrapServers: to},
				Topics: v1alpha1.TopicsSpec{Include: []string{"orders"}},
			},
		}
	}
	self := km("a", "self", "dc1:9092", "dc2:9092", "dc2b:9092")
	objs := []client.Object{
		self,
		km("a", "back", "dc2:9092", "dc1:9092"),
		km("b", "back-other-namespace", "DC2:9092", "dc3:9092"),
		km("b", "back-second-server", "dc2b:9092", "dc1:9092"),
		km("a", "same-direction", "dc1:9092", "dc2:9092"),
		km("c", "elsewhere", "dc3:9092", "dc4:9092"),
	}
	scheme, err := NewScheme()
	if err != nil {
		t.Fatal(err)
	}
	names := func(ms []v1alpha1.KafkaMirror) string {
		var out []string
		for _, m := range ms {
			out = append(out, m.Namespace+"/"+m.Name)
		}
		sort.Strings(out)
		return strings.Join(out, " ")
	}
	cfg := RenderConfig(self)
	for _, tc := range []struct {
		name    string
		indexed bool
		want    string
	}{
		{"indexed", true, "a/back b/back-other-namespace b/back-second-server"},
		{"not indexed", false, "a/back a/same-direction a/self b/back-other-namespace b/back-second-server c/elsewhere"},
	} {
		b := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...)
		if tc.indexed {
			b = b.WithIndex(&v1alpha1.KafkaMirror{}, sourceServerIndex, func(o client.Object) []string {
				return sourceServers(o.(*v1alpha1.KafkaMirror))
			})
		}
		r := &KafkaMirrorReconciler{Client: b.Build(), sourceIndexed: tc.indexed}
		got, err := r.loopCandidates(context.Background(), cfg)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if names(got) != tc.want {
			t.Errorf("%s: candidates %q, want %q", tc.name, names(got), tc.want)
		}
	}
}
