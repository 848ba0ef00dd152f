package main

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
)

// rate is one throughput measurement.
type rate struct {
	Records int           `json:"records"`
	Bytes   int64         `json:"bytes"`
	Elapsed time.Duration `json:"elapsedNs"`
}

// RecordsPerSecond is the measured record rate.
func (r rate) RecordsPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Records) / r.Elapsed.Seconds()
}

// MBPerSecond is the measured rate of key and value bytes, in MB (10^6 bytes) per second.
func (r rate) MBPerSecond() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Bytes) / 1e6 / r.Elapsed.Seconds()
}

// produceLimit writes n records into topic on cfg.Target with the producer settings the
// engine uses for cfg (kafka.ProducerConfig: acks, idempotence, open requests, retries,
// partitioner, buffer sizes), as fast as the target acks them. It measures the fastest
// the engine could possibly write, with nothing of the engine on the path.
func produceLimit(ctx context.Context, cfg *config.Config, g *recordGen, topic string, partitions int32, n int) (rate, error) {
	sc, err := kafka.ProducerConfig(cfg)
	if err != nil {
		return rate{}, fmt.Errorf("while configuring the limit producer: %w", err)
	}
	p, err := sarama.NewAsyncProducer(cfg.Target.BootstrapServers, sc)
	if err != nil {
		return rate{}, fmt.Errorf("while creating the limit producer: %w", err)
	}
	var (
		acked    atomic.Int64
		firstErr error
		errOnce  sync.Once
		done     = make(chan struct{})
		wg       sync.WaitGroup
	)
	wg.Add(2)
	go func() {
		defer wg.Done()
		for range p.Successes() {
			if acked.Add(1) == int64(n) {
				close(done)
			}
		}
	}()
	go func() {
		defer wg.Done()
		for e := range p.Errors() {
			errOnce.Do(func() { firstErr = e.Err })
		}
	}()
	var bytes int64
	start := time.Now()
	for i := 0; i < n; i++ {
		select {
		case p.Input() <- g.saramaMessage(topic, partitions, i):
			bytes += int64(g.recordBytes(i))
		case <-ctx.Done():
			p.AsyncClose()
			wg.Wait()
			return rate{}, ctx.Err()
		}
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
	elapsed := time.Since(start)
	p.AsyncClose()
	wg.Wait()
	if firstErr != nil {
		return rate{}, fmt.Errorf("while producing to the target: %w", firstErr)
	}
	if err := ctx.Err(); err != nil {
		return rate{}, err
	}
	return rate{Records: n, Bytes: bytes, Elapsed: elapsed}, nil
}

// consumeLimit reads n records from topic on cfg.Source with the consumer settings the
// engine uses (kafka.ConsumerConfig: isolation level, buffer sizes), every partition at
// once from its oldest offset, and measures how fast they arrive. It reads partitions
// directly rather than through a group, so no group join is timed.
func consumeLimit(ctx context.Context, cfg *config.Config, topic string, partitions int32, n int) (rate, error) {
	sc, err := kafka.ConsumerConfig(cfg)
	if err != nil {
		return rate{}, fmt.Errorf("while configuring the limit consumer: %w", err)
	}
	c, err := sarama.NewConsumer(cfg.Source.BootstrapServers, sc)
	if err != nil {
		return rate{}, fmt.Errorf("while creating the limit consumer: %w", err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		read, bytes atomic.Int64
		done        = make(chan struct{})
		doneOnce    sync.Once
		wg          sync.WaitGroup
	)
	start := time.Now()
	for p := int32(0); p < partitions; p++ {
		pc, err := c.ConsumePartition(topic, p, sarama.OffsetOldest)
		if err != nil {
			return rate{}, fmt.Errorf("while consuming %s/%d: %w", topic, p, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer pc.AsyncClose()
			for {
				select {
				case m := <-pc.Messages():
					bytes.Add(int64(len(m.Key) + len(m.Value)))
					if read.Add(1) == int64(n) {
						doneOnce.Do(func() { close(done) })
					}
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
	elapsed := time.Since(start)
	cancel()
	wg.Wait()
	if read.Load() < int64(n) {
		return rate{}, fmt.Errorf("while consuming %s: read %d of %d records: %w", topic, read.Load(), n, ctx.Err())
	}
	return rate{Records: n, Bytes: bytes.Load(), Elapsed: elapsed}, nil
}
