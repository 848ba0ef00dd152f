package handler

import (
	"fmt"
	"strings"
	"sync"
)

// HandlerFactory builds a named handler from its args (handlers[i].args in the config).
// It returns an error, preferably an *ArgError, when the args are not acceptable.
type HandlerFactory func(args map[string]string) (Handler, error)

// ListenerFactory builds a named rebalance listener from its args
// (rebalanceListener.args in the config).
type ListenerFactory func(args map[string]string) (RebalanceListener, error)

// registry holds factories by name. Names are kept in registration order so that error
// messages list the built-ins first, in the order they are documented.
type registry[F any] struct {
	mu        sync.RWMutex
	kind      string
	names     []string
	factories map[string]F
}

var (
	handlers  = &registry[HandlerFactory]{kind: "handler", factories: map[string]HandlerFactory{}}
	listeners = &registry[ListenerFactory]{kind: "rebalance listener", factories: map[string]ListenerFactory{}}
)

// Register makes a handler factory available under name, so that a config step
// `{name: NAME, args: {...}}` builds it. Call it from an init function or from main
// before the engine starts. It panics when name is empty or already registered: that is
// a programming error in the binary, never a problem with user input.
func Register(name string, factory func(args map[string]string) (Handler, error)) {
	handlers.add(name, factory)
}

// RegisterListener makes a rebalance listener factory available under name, so that a
// config `rebalanceListener: {name: NAME, args: {...}}` builds it. Like Register, it
// panics only on an empty or duplicate name.
func RegisterListener(name string, factory func(args map[string]string) (RebalanceListener, error)) {
	listeners.add(name, factory)
}

// Registered returns the names of the registered handlers in registration order.
func Registered() []string { return handlers.list() }

// RegisteredListeners returns the names of the registered rebalance listeners in
// registration order.
func RegisteredListeners() []string { return listeners.list() }

func (r *registry[F]) add(name string, f F) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if strings.TrimSpace(name) == "" {
		panic(fmt.Sprintf("handler: a %s needs a name", r.kind))
	}
	if _, dup := r.factories[name]; dup {
		panic(fmt.Sprintf("handler: %s %q is registered twice", r.kind, name))
	}
	r.factories[name] = f
	r.names = append(r.names, name)
}

func (r *registry[F]) get(name string) (F, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	f, ok := r.factories[name]
	if !ok {
		return f, fmt.Errorf("unknown %s %q (registered: %s)", r.kind, name, strings.Join(r.names, ", "))
	}
	return f, nil
}

func (r *registry[F]) list() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return append([]string(nil), r.names...)
}

// The built-ins are registered in one place so that their order (the order the docs
// list them in) does not depend on file names.
func init() {
	Register("identity", newIdentity)
	Register("header-filter", newHeaderFilter)
	Register("topic-router", newTopicRouter)
	RegisterListener("log", newLogListener)
}
