package mirror

import (
	"time"

	"github.com/IBM/sarama"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
)

// Option changes how New builds an Engine.
type Option func(*options)

type options struct {
	log              logr.Logger
	registerer       prometheus.Registerer
	kafkaOpts        []kafka.Option
	progressInterval time.Duration
	drainTimeout     time.Duration
	// tuneSarama lets in-package tests shorten group timings (heartbeats, session
	// timeouts) that production leaves at sarama's defaults.
	tuneSarama func(*sarama.Config)
}

// WithLogger sets the engine's logger. The default discards.
func WithLogger(log logr.Logger) Option {
	return func(o *options) { o.log = log }
}

// WithRegisterer registers the engine's metrics with r instead of a fresh registry.
// When r is also a prometheus.Gatherer, /metrics serves it.
func WithRegisterer(r prometheus.Registerer) Option {
	return func(o *options) { o.registerer = r }
}

// WithKafkaOptions passes options to every sarama configuration the engine builds, for
// example kafka.WithFileReader.
func WithKafkaOptions(opts ...kafka.Option) Option {
	return func(o *options) { o.kafkaOpts = append(o.kafkaOpts, opts...) }
}

// WithProgressInterval sets how often a progress line is logged at info level (default
// 30 s; 0 turns it off).
func WithProgressInterval(d time.Duration) Option {
	return func(o *options) { o.progressInterval = d }
}

// WithDrainTimeout bounds how long a released partition waits for its in-flight records
// to be acked before committing what was acked. The default is the consumer group's
// rebalance timeout minus a margin, so the drain always fits inside the rebalance.
func WithDrainTimeout(d time.Duration) Option {
	return func(o *options) { o.drainTimeout = d }
}
