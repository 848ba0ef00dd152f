package controllers

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// renderedConfigs remembers, per KafkaMirror, the engine config rendered and validated
// for its current generation and its mirror.yaml: both depend on the spec alone, which
// only a new generation changes, and rendering them (regular expressions compiled, CEL
// checked, YAML through JSON) was most of an idle reconcile's CPU. Its zero value is
// ready to use.
type renderedConfigs struct {
	mu sync.Mutex
	m  map[types.NamespacedName]*renderedConfig
	// refusePrivileged also refuses pod settings beyond the restricted Pod Security
	// Standard (--refuse-privileged-pods); set before the first reconcile.
	refusePrivileged bool
}

// renderedConfig is one KafkaMirror generation's config. Nobody modifies cfg once it is
// rendered.
type renderedConfig struct {
	uid        types.UID
	generation int64
	cfg        *config.Config
	invalid    error
	yaml       []byte
	// failback is cfg with mirror.yaml initialPositions.fromFailover set (a failback
	// mirror, resolved by resolveInitialPositions), and failbackYAML its mirror.yaml.
	failback     *config.Config
	failbackYAML []byte
}

// validate returns validate(m), rendered once per generation of m.
func (c *renderedConfigs) validate(m *v1alpha1.KafkaMirror) (*config.Config, error) {
	key := types.NamespacedName{Namespace: m.Namespace, Name: m.Name}
	c.mu.Lock()
	e, ok := c.m[key]
	c.mu.Unlock()
	if ok && e.uid == m.UID && e.generation == m.Generation {
		return e.cfg, e.invalid
	}
	cfg, invalid := validate(m)
	if invalid == nil && c.refusePrivileged {
		if problems := privilegedPodProblems(m); len(problems) > 0 {
			invalid = &notAllowedError{reason: v1alpha1.ReasonPrivilegedPodNotAllowed, problems: problems}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[types.NamespacedName]*renderedConfig{}
	}
	c.m[key] = &renderedConfig{uid: m.UID, generation: m.Generation, cfg: cfg, invalid: invalid}
	return cfg, invalid
}

// mirrorYAML returns config.Marshal(cfg), rendered once when cfg is the one validate
// (or withInitialPositions) returned for m's current generation.
func (c *renderedConfigs) mirrorYAML(m *v1alpha1.KafkaMirror, cfg *config.Config) ([]byte, error) {
	key := types.NamespacedName{Namespace: m.Namespace, Name: m.Name}
	c.mu.Lock()
	e, ok := c.m[key]
	switch {
	case ok && e.cfg == cfg && e.yaml != nil:
		c.mu.Unlock()
		return e.yaml, nil
	case ok && e.failback == cfg && e.failbackYAML != nil:
		c.mu.Unlock()
		return e.failbackYAML, nil
	}
	c.mu.Unlock()
	b, err := config.Marshal(cfg)
	if err != nil || !ok || (e.cfg != cfg && e.failback != cfg) {
		return b, err
	}
	c.mu.Lock()
	if e.cfg == cfg {
		e.yaml = b
	} else {
		e.failbackYAML = b
	}
	c.mu.Unlock()
	return b, nil
}

// withInitialPositions returns cfg with initialPositions.fromFailover set to group (the
// consumer group of the failed-over mirror a failback mirror starts from), made once
// when cfg is the one validate returned for m's current generation. cfg itself is left
// as it is: it is shared.
func (c *renderedConfigs) withInitialPositions(m *v1alpha1.KafkaMirror, cfg *config.Config, group string) *config.Config {
	key := types.NamespacedName{Namespace: m.Namespace, Name: m.Name}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if ok && e.cfg == cfg && e.failback != nil && e.failback.InitialPositions.FromFailover == group {
		return e.failback
	}
	out := *cfg
	out.InitialPositions = &config.InitialPositions{FromFailover: group}
	if ok && e.cfg == cfg {
		e.failback, e.failbackYAML = &out, nil
	}
	return &out
}

// forget drops what is remembered about a deleted KafkaMirror.
func (c *renderedConfigs) forget(key types.NamespacedName) {
	c.mu.Lock()
	delete(c.m, key)
	c.mu.Unlock()
}
