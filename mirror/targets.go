package mirror

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"

	"github.com/IBM/sarama"
)

// targetTopics answers whether a target topic exists and how many partitions it has.
// Its metadata requests never auto-create topics (kafka.NewConfig turns that off).
//
// Two kinds of client take part. probe (the target admin's client) answers the
// question: its metadata refresh fails within a second when the topic is missing or
// the target is unreachable, so a waiting partition logs, backs off and notices ctx
// ending. clients (the batching producers' own) must all agree before a record is
// sent, or sarama's manual partitioner would refuse a partition its client does not
// know yet; but each retries a refresh for up to deliveryTimeout
// (kafka.ProducerConfig), so they are asked only once probe found the topic ready, and
// never longer than ctx allows.
type targetTopics struct {
	clients  []sarama.Client
	probe    sarama.Client
	preserve bool

	// checks counts calls of check and refreshes those among them that refreshed
	// producers' clients, so tests can show that a ready topic costs no call per record.
	checks, refreshes atomic.Int64
}

func newTargetTopics(clients []sarama.Client, probe sarama.Client, preserve bool) *targetTopics {
	return &targetTopics{clients: clients, probe: probe, preserve: preserve}
}

// check returns the topic's partition count when it can take a record for partition
// (with preserve, the target needs more than partition partitions), or why it cannot.
//
// Every client is first read from its cached metadata, which needs no request and no
// goroutine: that is every call once a topic is ready. Only the producers' clients
// that lag behind probe's (a new topic, more partitions) are refreshed, concurrently,
// in goroutines so that ctx bounds the wait.
func (t *targetTopics) check(ctx context.Context, topic string, partition int32, refresh bool) (int32, error) {
	t.checks.Add(1)
	if refresh {
		if err := t.probe.RefreshMetadata(topic); err != nil && !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
			return 0, fmt.Errorf("while reading metadata of target topic %q: %w", topic, err)
		}
	}
	n, err := t.partitions(t.probe, topic, partition)
	if err != nil {
		return n, err
	}
	// Every producer's view, from its cache; those that lag behind probe's are
	// refreshed together (one round trip, not one per producer). A refresh may retry
	// for up to deliveryTimeout, so the whole step is bounded by ctx.
	var lagging []sarama.Client
	known := int32(-1)
	for _, client := range t.clients {
		if !cached(client, topic) {
			lagging = append(lagging, client)
			continue
		}
		cn, err := t.partitions(client, topic, partition)
		if err != nil {
			lagging = append(lagging, client)
			continue
		}
		known = minKnown(known, cn)
	}
	if len(lagging) == 0 {
		return known, nil
	}
	t.refreshes.Add(1)
	type verdict struct {
		n   int32
		err error
	}
	done := make(chan verdict, len(lagging))
	for _, client := range lagging {
		go func() {
			var v verdict
			if rerr := client.RefreshMetadata(topic); rerr != nil {
				v.err = fmt.Errorf("while reading metadata of target topic %q: %w", topic, rerr)
			} else {
				v.n, v.err = t.partitions(client, topic, partition)
			}
			done <- v
		}()
	}
	for range lagging {
		select {
		case v := <-done:
			if v.err != nil {
				return v.n, v.err
			}
			known = minKnown(known, v.n)
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	return known, nil
}

// minKnown is the smaller of two partition counts, known being -1 before the first.
func minKnown(known, n int32) int32 {
	if known < 0 {
		return n
	}
	return min(known, n)
}

// cached reports whether client holds metadata of topic, so that reading its
// partitions needs no request (sarama's Partitions refreshes a topic it does not know).
func cached(client sarama.Client, topic string) bool {
	topics, err := client.Topics()
	return err == nil && slices.Contains(topics, topic)
}

// partitions is check's verdict from one client's cached metadata.
func (t *targetTopics) partitions(client sarama.Client, topic string, partition int32) (int32, error) {
	parts, err := client.Partitions(topic)
	if err != nil {
		if errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
			return 0, fmt.Errorf("target topic %q does not exist", topic)
		}
		return 0, fmt.Errorf("while reading partitions of target topic %q: %w", topic, err)
	}
	n := int32(len(parts))
	if n == 0 {
		return 0, fmt.Errorf("target topic %q does not exist", topic)
	}
	if t.preserve && partition >= n {
		return n, fmt.Errorf("target topic %q has %d partitions and partitioning is preserve: partition %d needs at least %d",
			topic, n, partition, partition+1)
	}
	return n, nil
}
