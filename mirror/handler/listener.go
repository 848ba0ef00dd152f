package handler

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// NewListener builds the rebalance listener a config names; a nil spec gives a nil
// listener and no error. The listener returned contains the user's: it never returns
// an error, never panics and never runs longer than the listener timeout; failures are
// logged, counted (Errors) and passed to the OnListenerError hook, so a listener can
// never block the engine's drain. Errors name their field path
// (rebalanceListener.name, rebalanceListener.args.NAME).
func NewListener(spec *config.PluginSpec, opts ...ChainOption) (RebalanceListener, error) {
	if spec == nil {
		return nil, nil
	}
	o := newOptions("rebalanceListener", opts)
	if strings.TrimSpace(spec.Name) == "" {
		return nil, &FieldError{Field: o.fieldPath + ".name", Detail: "the name of a registered rebalance listener is required"}
	}
	factory, err := listeners.get(spec.Name)
	if err != nil {
		return nil, &FieldError{Field: o.fieldPath + ".name", Detail: err.Error(), Unregistered: true}
	}
	l, err := callFactory(func() (RebalanceListener, error) { return factory(spec.Args) })
	if err != nil {
		return nil, argFieldError(o.fieldPath+".args", err)
	}
	if l == nil {
		return nil, &FieldError{Field: o.fieldPath + ".name", Detail: fmt.Sprintf("rebalance listener %q built nothing (its factory returned nil)", spec.Name)}
	}
	if ll, ok := l.(*logListener); ok {
		ll.log = o.log
	}
	return &SafeListener{name: spec.Name, inner: l, log: o.log, timeout: o.listenerTimeout, onError: o.onListenerError}, nil
}

// SafeListener wraps a RebalanceListener so that its errors, panics and hangs are
// logged and counted instead of reaching the engine. NewListener returns one.
type SafeListener struct {
	name    string
	inner   RebalanceListener
	log     logr.Logger
	timeout time.Duration
	onError func(event string, err error)
	errors  atomic.Uint64
}

// OnAssigned calls the wrapped listener's OnAssigned; it always returns nil.
func (s *SafeListener) OnAssigned(ctx context.Context, partitions []TopicPartition) error {
	s.call(ctx, "assigned", partitions, s.inner.OnAssigned)
	return nil
}

// OnRevoked calls the wrapped listener's OnRevoked; it always returns nil.
func (s *SafeListener) OnRevoked(ctx context.Context, partitions []TopicPartition) error {
	s.call(ctx, "revoked", partitions, s.inner.OnRevoked)
	return nil
}

// Errors returns how many listener calls failed, panicked or timed out.
func (s *SafeListener) Errors() uint64 { return s.errors.Load() }

// call runs fn in its own goroutine so that a listener that hangs costs at most the
// timeout: the goroutine is abandoned (its context cancelled) and the rebalance goes on.
func (s *SafeListener) call(ctx context.Context, event string, partitions []TopicPartition, fn func(context.Context, []TopicPartition) error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	// The listener gets its own copy: it may keep it after a timeout.
	parts := append([]TopicPartition(nil), partitions...)
	done := make(chan error, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- fmt.Errorf("rebalance listener %q panicked: %v", s.name, r)
			}
		}()
		done <- fn(ctx, parts)
	}()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		err = fmt.Errorf("rebalance listener %q did not return within %s: %w", s.name, s.timeout, ctx.Err())
	}
	if err == nil {
		return
	}
	s.errors.Add(1)
	s.log.Error(err, "Rebalance listener failed", "listener", s.name, "event", event, "partitions", len(partitions))
	if s.onError != nil {
		s.onError(event, err)
	}
}
