package controllers

import (
	"bytes"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// TestRenderedConfigsFollowTheGeneration: the config and mirror.yaml are rendered once
// per generation, a new generation (or a KafkaMirror re-created under the same name)
// renders again, and a spec error is remembered with its config.
func TestRenderedConfigsFollowTheGeneration(t *testing.T) {
	m := &v1alpha1.KafkaMirror{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "cached", UID: "uid-1", Generation: 1},
		Spec: v1alpha1.KafkaMirrorSpec{
			Source: v1alpha1.ClusterSpec{BootstrapServers: []string{"src:9092"}},
			Target: v1alpha1.ClusterSpec{BootstrapServers: []string{"tgt:9092"}},
			Topics: v1alpha1.TopicsSpec{Include: []string{`orders\..*`}},
		},
	}
	var c renderedConfigs
	cfg1, err := c.validate(m)
	if err != nil {
		t.Fatalf("validate: %v", err)
	}
	y1, err := c.mirrorYAML(m, cfg1)
	if err != nil {
		t.Fatalf("mirrorYAML: %v", err)
	}
	want, err := config.Marshal(cfg1)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(y1, want) {
		t.Errorf("mirrorYAML differs from config.Marshal:\n%s\nwant\n%s", y1, want)
	}

	cfg2, _ := c.validate(m)
	y2, _ := c.mirrorYAML(m, cfg2)
	if cfg2 != cfg1 || &y2[0] != &y1[0] {
		t.Errorf("same generation rendered again: config %p -> %p, yaml %p -> %p", cfg1, cfg2, &y1[0], &y2[0])
	}

	steps := []struct {
		name   string
		change func(*v1alpha1.KafkaMirror)
		// wantStreams is spec.streams as the new config has it; wantErr a part of the
		// spec error, "" for none.
		wantStreams int
		wantErr     string
	}{
		{"new generation", func(m *v1alpha1.KafkaMirror) { m.Generation, m.Spec.Streams = 2, 3 }, 3, ""},
		{"re-created under the same name", func(m *v1alpha1.KafkaMirror) { m.UID, m.Generation, m.Spec.Streams = "uid-2", 2, 5 }, 5, ""},
		{"invalid spec", func(m *v1alpha1.KafkaMirror) { m.Generation, m.Spec.Topics.Include = 3, []string{"("} }, 5, "spec.topics.include[0]"},
	}
	for _, st := range steps {
		prev, _ := c.validate(m)
		st.change(m)
		cfg, err := c.validate(m)
		if cfg == prev {
			t.Errorf("%s: the config of the previous generation was returned", st.name)
			continue
		}
		if cfg.Streams != st.wantStreams {
			t.Errorf("%s: streams %d, want %d", st.name, cfg.Streams, st.wantStreams)
		}
		if st.wantErr == "" && err != nil || st.wantErr != "" && (err == nil || !strings.Contains(err.Error(), st.wantErr)) {
			t.Errorf("%s: error %v, want one naming %q", st.name, err, st.wantErr)
		}
		again, errAgain := c.validate(m)
		if again != cfg || (errAgain == nil) != (err == nil) {
			t.Errorf("%s: the same generation was not remembered (error %v, then %v)", st.name, err, errAgain)
		}
		y, _ := c.mirrorYAML(m, cfg)
		if !bytes.Contains(y, []byte("streams: "+string(rune('0'+st.wantStreams)))) {
			t.Errorf("%s: mirror.yaml does not have streams %d:\n%s", st.name, st.wantStreams, y)
		}
	}

	c.forget(types.NamespacedName{Namespace: "ns", Name: "cached"})
	if len(c.m) != 0 {
		t.Errorf("forget left %d entries", len(c.m))
	}
}

// TestRenderedConfigsWithInitialPositions: a failback mirror's config is the
// generation's config with initialPositions.fromFailover, made once per generation and
// group; the generation's own config is left as it is (it is shared).
func TestRenderedConfigsWithInitialPositions(t *testing.T) {
	m := &v1alpha1.KafkaMirror{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "failback", UID: "uid-1", Generation: 1},
		Spec: v1alpha1.KafkaMirrorSpec{
			Source: v1alpha1.ClusterSpec{BootstrapServers: []string{"tgt:9092"}},
			Target: v1alpha1.ClusterSpec{BootstrapServers: []string{"src:9092"}},
			Topics: v1alpha1.TopicsSpec{Include: []string{`orders\..*`}},
		},
	}
	var c renderedConfigs
	cfg, err := c.validate(m)
	if err != nil {
		t.Fatal(err)
	}
	fb := c.withInitialPositions(m, cfg, "orders-mirror")
	if cfg.InitialPositions != nil {
		t.Fatalf("the generation's config was changed: %+v", cfg.InitialPositions)
	}
	expect(t, "initialPositions", *fb.InitialPositions, config.InitialPositions{FromFailover: "orders-mirror"})
	if again := c.withInitialPositions(m, cfg, "orders-mirror"); again != fb {
		t.Errorf("made again for the same generation and group")
	}
	y, err := c.mirrorYAML(m, fb)
	if err != nil || !bytes.Contains(y, []byte("initialPositions:\n  fromFailover: orders-mirror\n")) {
		t.Fatalf("mirror.yaml (%v):\n%s", err, y)
	}
	if y2, _ := c.mirrorYAML(m, fb); &y2[0] != &y[0] {
		t.Errorf("the failback mirror.yaml was rendered again")
	}
	if plain, _ := c.mirrorYAML(m, cfg); bytes.Contains(plain, []byte("initialPositions")) {
		t.Errorf("the generation's mirror.yaml has initialPositions:\n%s", plain)
	}
	if other := c.withInitialPositions(m, cfg, "other"); other == fb || other.InitialPositions.FromFailover != "other" {
		t.Errorf("another group got %+v", other.InitialPositions)
	}
}
