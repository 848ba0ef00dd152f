package kafka

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/IBM/sarama"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// NewClient connects a sarama client to cl. Use WithRole to name the cluster in errors:
// "while connecting to the source cluster [a:9092]: kafka: client has run out of
// available brokers to talk to: ...".
func NewClient(cl config.Cluster, opts ...Option) (sarama.Client, error) {
	sc, err := NewConfig(cl, opts...)
	if err != nil {
		return nil, err
	}
	return NewClientFromConfig(cl, sc, opts...)
}

// NewClientFromConfig connects a client with an already built configuration (for
// example from ConsumerConfig), wrapping errors like NewClient.
func NewClientFromConfig(cl config.Cluster, sc *sarama.Config, opts ...Option) (sarama.Client, error) {
	o := newOptions(opts)
	c, err := sarama.NewClient(cl.BootstrapServers, sc)
	if err != nil {
		return nil, connectError(o.role, cl, err)
	}
	if !sc.Metadata.Full {
		startFromALiveSeed(c, cl.BootstrapServers)
	}
	return c, nil
}

// startFromALiveSeed readies a client that knows no broker yet (Metadata.Full off, as
// the producers' clients are: they read only the topics they write to). Until its
// first metadata answer, sarama sends what may go to any broker (a producer's
// InitProducerId) to the first of its shuffled seeds, and retries that same seed: one
// dead bootstrap server among several stopped a producer at start, and with it the
// engine (TestStartsWithDeadTargetBootstrapServers). Here the seed sarama would use is
// connected first (with TLS and SASL); one that fails is left out of the seeds, which
// sarama shuffles again, until one answers or a single one is left (whose error the
// first request then reports). The connection is the one that request would have
// opened: no extra round trip when the first seed answers.
func startFromALiveSeed(c sarama.Client, seeds []string) {
	seeds = slices.Clone(seeds)
	for len(seeds) > 1 {
		b := c.LeastLoadedBroker()
		if b == nil {
			return
		}
		if ok, _ := b.Connected(); ok {
			return
		}
		rest := slices.DeleteFunc(slices.Clone(seeds), func(a string) bool { return a == b.Addr() })
		if len(rest) == len(seeds) || c.RefreshBrokers(rest) != nil {
			return
		}
		seeds = rest
	}
}

// NewClusterAdmin connects a cluster admin to cl, wrapping errors like NewClient.
func NewClusterAdmin(cl config.Cluster, opts ...Option) (sarama.ClusterAdmin, error) {
	sc, err := NewConfig(cl, opts...)
	if err != nil {
		return nil, err
	}
	o := newOptions(opts)
	a, err := sarama.NewClusterAdmin(cl.BootstrapServers, sc)
	if err != nil {
		return nil, connectError(o.role, cl, err)
	}
	return a, nil
}

func connectError(role string, cl config.Cluster, err error) error {
	return fmt.Errorf("while connecting to the %s cluster [%s]: %w%s", role, strings.Join(cl.BootstrapServers, ","), err, hint(role, cl, err))
}

// hint adds the likely cause to errors whose text alone does not help: a broker that
// rejects credentials either answers with an authentication error or (some brokers and
// proxies) just closes the connection, which sarama reports as EOF.
func hint(role string, cl config.Cluster, err error) string {
	switch {
	case cl.SASL != nil && errors.Is(err, sarama.ErrSASLAuthenticationFailed):
		return fmt.Sprintf(" (SASL %s authentication as %q was rejected: check %s.sasl.username and %s.sasl.passwordFile)",
			cl.SASL.Mechanism, cl.SASL.Username, role, role)
	case cl.SASL != nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)):
		return fmt.Sprintf(" (the broker closed the connection during SASL %s authentication as %q: check %s.sasl.username and %s.sasl.passwordFile)",
			cl.SASL.Mechanism, cl.SASL.Username, role, role)
	case cl.TLS == nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)):
		return fmt.Sprintf(" (the broker closed the connection: if it requires TLS or SASL, set %s.tls or %s.sasl)", role, role)
	}
	return ""
}
