package mirror

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/IBM/sarama"
)

// Backoff while a partition waits for its target topic.
const (
	targetWaitMin = 500 * time.Millisecond
	targetWaitMax = 10 * time.Second
)

// targetTopics answers whether a target topic exists and how many partitions it has.
// Its metadata requests never auto-create topics (kafka.NewConfig turns that off).
//
// Two clients take part. probe (the target admin's client) answers the question: its
// metadata refresh fails within a second when the topic is missing or the target is
// unreachable, so a waiting partition logs, backs off and notices ctx ending. client
// (the producer's own) must agree before a record is sent, or sarama's manual
// partitioner would refuse a partition it does not know yet; but it retries a refresh
// for up to deliveryTimeout (kafka.ProducerConfig), so it is asked only once probe
// found the topic ready, and never longer than ctx allows.
type targetTopics struct {
	client   sarama.Client
	probe    sarama.Client
	preserve bool
}

func newTargetTopics(client, probe sarama.Client, preserve bool) *targetTopics {
	return &targetTopics{client: client, probe: probe, preserve: preserve}
}

// check returns the topic's partition count when it can take a record for partition
// (with preserve, the target needs more than partition partitions), or why it cannot.
func (t *targetTopics) check(ctx context.Context, topic string, partition int32, refresh bool) (int32, error) {
	if refresh {
		if err := t.probe.RefreshMetadata(topic); err != nil && !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
			return 0, fmt.Errorf("while reading metadata of target topic %q: %w", topic, err)
		}
	}
	n, err := t.partitions(t.probe, topic, partition)
	if err != nil {
		return n, err
	}
	// The producer's view, refreshed when it lags behind probe's (a new topic, more
	// partitions). Reading it may refresh too, so the whole step is bounded by ctx.
	type verdict struct {
		n   int32
		err error
	}
	done := make(chan verdict, 1)
	go func() {
		n, err := t.partitions(t.client, topic, partition)
		if err != nil {
			if rerr := t.client.RefreshMetadata(topic); rerr != nil {
				err = fmt.Errorf("while reading metadata of target topic %q: %w", topic, rerr)
			} else {
				n, err = t.partitions(t.client, topic, partition)
			}
		}
		done <- verdict{n, err}
	}()
	select {
	case v := <-done:
		return v.n, v.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
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

// awaitTarget returns once topic can take records from this claim. The fast path is
// the claim's cache; otherwise it asks the target and, while the topic is missing or
// too small, waits with backoff (this partition only: the others go on), logs once and
// sets the partition's waiting gauge. It returns ctx's error when ctx ends first.
func (e *Engine) awaitTarget(ctx context.Context, c *claimState, topic string, partition int32) error {
	if topic == c.readyTopic && (!e.preserve || partition < c.readyParts) {
		return nil
	}
	retry := newBackoff(targetWaitMin, targetWaitMax)
	for attempt := 0; ; attempt++ {
		n, err := e.targets.check(ctx, topic, partition, attempt > 0)
		if err == nil {
			c.readyTopic, c.readyParts = topic, n
			if attempt > 0 {
				c.part.waiting.Store(0)
				e.log.Info("Resumed partition: its target topic is ready", "topic", c.topic, "partition", c.part.partition,
					"targetTopic", topic, "targetPartitions", n)
			}
			return nil
		}
		if attempt == 0 {
			c.part.waiting.Store(1)
			e.log.Info("Paused partition until its target topic is ready", "topic", c.topic, "partition", c.part.partition,
				"targetTopic", topic, "reason", err.Error())
		}
		select {
		case <-ctx.Done():
			c.part.waiting.Store(0)
			return ctx.Err()
		case <-e.failed:
			c.part.waiting.Store(0)
			return errStopped
		case <-time.After(retry.next()):
		}
	}
}
