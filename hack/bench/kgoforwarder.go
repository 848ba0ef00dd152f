package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// kgoForwarderCommand is the hidden first argument with which the benchmark re-runs
// itself as the franz-go forwarder: the reference for a far target (issue 28). It is
// what MirrorMaker 2's Java producer does with the no-data-loss settings: idempotent,
// acks=all, up to 5 produce requests in flight per broker (franz-go's idempotent
// producer allows that many on Kafka v1 and later, as the Java one does), records
// kept in their source partition, and a source offset committed only once the target
// acked it and everything before it. It takes the engine's command line, like the
// bare sarama forwarder (forwarderCommand), so it is started and measured the same way.
//
//	bench kgo-forwarder run --config FILE [--log-format X --log-level Y]
const kgoForwarderCommand = "kgo-forwarder"

// kgoCommitInterval is how often the franz-go forwarder commits acked offsets, the
// engine's default offsetCommitInterval.
const kgoCommitInterval = 5 * time.Second

func runKgoForwarder(args []string) error { return runForwarderChild(args, kgoForward) }

// ackedOffsets is, per source partition, the next offset to commit: one past the
// highest record the target acked. The idempotent producer acks a partition's records
// in order, so that record's predecessors are acked too.
type ackedOffsets struct {
	mu   sync.Mutex
	next map[string]map[int32]kgo.EpochOffset
}

func (a *ackedOffsets) ack(r *kgo.Record) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.next == nil {
		a.next = map[string]map[int32]kgo.EpochOffset{}
	}
	t := a.next[r.Topic]
	if t == nil {
		t = map[int32]kgo.EpochOffset{}
		a.next[r.Topic] = t
	}
	t[r.Partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
}

func (a *ackedOffsets) take() map[string]map[int32]kgo.EpochOffset {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.next
	a.next = nil
	return out
}

// kgoForward is the franz-go forwarder's loop.
func kgoForward(ctx context.Context, cfg *config.Config) error {
	topic := unquoteTopic(cfg.Topics.Include[0])
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	producer, err := kgo.NewClient(
		kgo.SeedBrokers(cfg.Target.BootstrapServers...),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordDeliveryTimeout(cfg.DeliveryTimeout.Duration),
	)
	if err != nil {
		return fmt.Errorf("while creating the franz-go forwarder's producer: %w", err)
	}
	defer producer.Close()
	var acked ackedOffsets
	var consumer *kgo.Client
	commit := func(ctx context.Context) {
		if offs := acked.take(); len(offs) > 0 {
			consumer.CommitOffsetsSync(ctx, offs, nil)
		}
	}
	consumer, err = kgo.NewClient(
		kgo.SeedBrokers(cfg.Source.BootstrapServers...),
		kgo.ConsumerGroup(cfg.ConsumerGroup),
		kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.Balancers(kgo.StickyBalancer()),
		kgo.OnPartitionsRevoked(func(ctx context.Context, _ *kgo.Client, _ map[string][]int32) {
			// Everything handed over is acked before the partitions go: commit it.
			_ = producer.Flush(ctx)
			commit(ctx)
		}),
	)
	if err != nil {
		return fmt.Errorf("while creating the franz-go forwarder's consumer: %w", err)
	}
	defer consumer.Close()
	go func() {
		tick := time.NewTicker(kgoCommitInterval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				commit(ctx)
			}
		}
	}()
	for {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			break
		}
		if err := fetches.Err0(); err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("while consuming: %w", err)
		}
		fetches.EachRecord(func(m *kgo.Record) {
			out := &kgo.Record{Topic: m.Topic, Partition: m.Partition, Timestamp: m.Timestamp, Key: m.Key, Value: m.Value, Headers: m.Headers}
			producer.Produce(ctx, out, func(_ *kgo.Record, err error) {
				if err != nil {
					cancel(fmt.Errorf("while producing to the target: %w", err))
					return
				}
				acked.ack(m)
			})
		})
	}
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
