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

// targetTopics answers whether a target topic exists and how many partitions it has,
// from the producer's own client, so that the producer and this check agree. Its
// metadata requests never auto-create topics (kafka.NewConfig turns that off).
type targetTopics struct {
	client   sarama.Client
	preserve bool
}

func newTargetTopics(client sarama.Client, preserve bool) *targetTopics {
	return &targetTopics{client: client, preserve: preserve}
}

// check returns the topic's partition count when it can take a record for partition
// (with preserve, the target needs more than partition partitions), or why it cannot.
func (t *targetTopics) check(topic string, partition int32, refresh bool) (int32, error) {
	if refresh {
		if err := t.client.RefreshMetadata(topic); err != nil && !errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
			return 0, fmt.Errorf("while reading metadata of target topic %q: %w", topic, err)
		}
	}
	parts, err := t.client.Partitions(topic)
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
	wait := targetWaitMin
	for attempt := 0; ; attempt++ {
		n, err := e.targets.check(topic, partition, attempt > 0)
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
		case <-time.After(wait):
		}
		wait = min(wait*2, targetWaitMax)
	}
}
