package handler

import (
	"time"

	"github.com/go-logr/logr"
)

// Defaults of the chain and listener options.
const (
	// DefaultCostLimit bounds the CEL cost of one evaluation of one expression. A filter
	// such as `!('skip' in record.headers)` costs under 10; the limit stops runaway
	// comprehensions over large values long before they hurt throughput.
	DefaultCostLimit = 1_000_000
	// DefaultEvalTimeout bounds the wall time of one CEL evaluation of one record.
	DefaultEvalTimeout = 100 * time.Millisecond
	// DefaultSkipLogInterval is how often skipped records are logged, at most, per step.
	DefaultSkipLogInterval = 30 * time.Second
	// DefaultListenerTimeout bounds one rebalance listener call; a listener still running
	// after it is abandoned (its context is cancelled) so the rebalance goes on.
	DefaultListenerTimeout = 10 * time.Second
)

// ChainOption configures NewChain and NewListener.
type ChainOption func(*options)

type options struct {
	log             logr.Logger
	fieldPath       string
	costLimit       uint64
	evalTimeout     time.Duration
	skipLogInterval time.Duration
	listenerTimeout time.Duration
	onListenerError func(event string, err error)
}

func newOptions(defaultPath string, opts []ChainOption) options {
	o := options{
		log:             logr.Discard(),
		fieldPath:       defaultPath,
		costLimit:       DefaultCostLimit,
		evalTimeout:     DefaultEvalTimeout,
		skipLogInterval: DefaultSkipLogInterval,
		listenerTimeout: DefaultListenerTimeout,
	}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// WithLogger sets the logger handlers and listeners log through. Default: discard.
func WithLogger(log logr.Logger) ChainOption {
	return func(o *options) { o.log = log }
}

// WithFieldPath sets the field path errors are reported at: the handler list for
// NewChain (default "handlers") or the listener spec for NewListener (default
// "rebalanceListener"). The operator passes "spec.handlers" to report paths of its
// KafkaMirror resource.
func WithFieldPath(path string) ChainOption {
	return func(o *options) { o.fieldPath = path }
}

// WithCostLimit sets the CEL cost limit of one evaluation of one expression. Default
// DefaultCostLimit.
func WithCostLimit(limit uint64) ChainOption {
	return func(o *options) { o.costLimit = limit }
}

// WithEvalTimeout sets the wall-time bound of one CEL evaluation of one record; zero
// turns it off (the cost limit still applies). Default DefaultEvalTimeout.
func WithEvalTimeout(d time.Duration) ChainOption {
	return func(o *options) { o.evalTimeout = d }
}

// WithSkipLogInterval sets how often, at most, a step with `onError: skip` logs the
// records it skipped. Default DefaultSkipLogInterval.
func WithSkipLogInterval(d time.Duration) ChainOption {
	return func(o *options) { o.skipLogInterval = d }
}

// WithListenerTimeout bounds one rebalance listener call. Default DefaultListenerTimeout.
func WithListenerTimeout(d time.Duration) ChainOption {
	return func(o *options) { o.listenerTimeout = d }
}

// OnListenerError registers fn to be called (after logging) whenever the rebalance
// listener fails, panics or times out; event is "assigned" or "revoked". The engine uses
// it to count listener errors in its metrics.
func OnListenerError(fn func(event string, err error)) ChainOption {
	return func(o *options) { o.onListenerError = fn }
}
