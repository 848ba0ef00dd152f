package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/engineproc"
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

// steadyRate is the rate of n records timed from the first to the last: the window
// holds n-1 of them, and their share of the bytes.
func steadyRate(n int, bytes int64, d time.Duration) rate {
	if n <= 1 {
		return rate{Records: n, Bytes: bytes, Elapsed: d}
	}
	return rate{Records: n - 1, Bytes: bytes * int64(n-1) / int64(n), Elapsed: d}
}

// produceLimit writes n records into topic on cfg.Target with the producer settings the
// engine uses for cfg (kafka.ProducerConfig: acks, idempotence, open requests, retries,
// partitioner, buffer sizes), as fast as the target acks them, timed from the first ack
// to the last. It measures the fastest
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
		firstAck time.Time
		firstErr error
		errOnce  sync.Once
		done     = make(chan struct{})
		wg       sync.WaitGroup
	)
	wg.Add(2)
	go func() {
		defer wg.Done()
		for range p.Successes() {
			switch acked.Add(1) {
			case 1:
				firstAck = time.Now()
			case int64(n):
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
	// Build every message before the first send, so that the measurement holds the
	// producer's work only, as a mirror hands it records it already holds.
	msgs := make([]*sarama.ProducerMessage, n)
	var bytes int64
	for i := range msgs {
		msgs[i] = g.saramaMessage(topic, partitions, i)
		bytes += int64(g.recordBytes(i))
	}
	for i := 0; i < n; i++ {
		select {
		case p.Input() <- msgs[i]:
			msgs[i] = nil
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
	end := time.Now()
	p.AsyncClose()
	wg.Wait()
	if firstErr != nil {
		return rate{}, fmt.Errorf("while producing to the target: %w", firstErr)
	}
	if err := ctx.Err(); err != nil {
		return rate{}, err
	}
	// Timed from the first ack to the last, as the engine and the pipe are; the records
	// are counted the same way (the first one opens the window).
	return steadyRate(n, bytes, end.Sub(firstAck)), nil
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
		firstAt     atomic.Int64
		done        = make(chan struct{})
		doneOnce    sync.Once
		wg          sync.WaitGroup
	)
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
					switch read.Add(1) {
					case 1:
						firstAt.Store(time.Now().UnixNano())
					case int64(n):
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
	end := time.Now()
	cancel()
	wg.Wait()
	if read.Load() < int64(n) {
		return rate{}, fmt.Errorf("while consuming %s: read %d of %d records: %w", topic, read.Load(), n, ctx.Err())
	}
	return steadyRate(n, bytes.Load(), end.Sub(time.Unix(0, firstAt.Load()))), nil
}

// pipeLimit copies n records from topic on cfg.Source to the same topic on cfg.Target
// with the same clients and settings as the engine, and nothing else: every partition
// read directly, every record handed to the producer as it arrives, no offset tracking,
// no commits, no handler, no metrics. It is the fastest a mirror built on these two
// clients can be on this machine, where, unlike the two limits above, it shares the
// cores with both clusters as the engine does. It is timed from the first ack to the
// last, as the engine is.
func pipeLimit(ctx context.Context, cfg *config.Config, topic string, partitions int32, n int) (rate, error) {
	cc, err := kafka.ConsumerConfig(cfg)
	if err != nil {
		return rate{}, fmt.Errorf("while configuring the pipe consumer: %w", err)
	}
	pc, err := kafka.ProducerConfig(cfg)
	if err != nil {
		return rate{}, fmt.Errorf("while configuring the pipe producer: %w", err)
	}
	c, err := sarama.NewConsumer(cfg.Source.BootstrapServers, cc)
	if err != nil {
		return rate{}, fmt.Errorf("while creating the pipe consumer: %w", err)
	}
	defer c.Close()
	p, err := sarama.NewAsyncProducer(cfg.Target.BootstrapServers, pc)
	if err != nil {
		return rate{}, fmt.Errorf("while creating the pipe producer: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		acked    int
		bytes    int64
		first    time.Time
		done     = make(chan struct{})
		firstErr error
		wg       sync.WaitGroup
	)
	wg.Add(2)
	go func() {
		defer wg.Done()
		for m := range p.Successes() {
			if acked == 0 {
				first = time.Now()
			}
			acked++
			bytes += int64(m.Key.Length() + m.Value.Length())
			if acked == n {
				close(done)
			}
		}
	}()
	go func() {
		defer wg.Done()
		for e := range p.Errors() {
			if firstErr == nil {
				firstErr = e.Err
				cancel()
			}
		}
	}()
	var readers sync.WaitGroup
	for part := int32(0); part < partitions; part++ {
		pcons, err := c.ConsumePartition(topic, part, sarama.OffsetOldest)
		if err != nil {
			cancel()
			p.AsyncClose()
			wg.Wait()
			return rate{}, fmt.Errorf("while consuming %s/%d: %w", topic, part, err)
		}
		readers.Add(1)
		go func() {
			defer readers.Done()
			defer pcons.AsyncClose()
			for {
				select {
				case m := <-pcons.Messages():
					select {
					case p.Input() <- forwarded(m):
					case <-ctx.Done():
						return
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
	end := time.Now()
	cancel()
	readers.Wait()
	p.AsyncClose()
	wg.Wait()
	if firstErr != nil {
		return rate{}, fmt.Errorf("while producing to the target: %w", firstErr)
	}
	if acked < n {
		return rate{}, fmt.Errorf("while piping %s: %d of %d records acked: %w", topic, acked, n, ctx.Err())
	}
	return steadyRate(n, bytes, end.Sub(first)), nil
}

// limitCommand is the hidden first argument with which the benchmark re-runs itself to
// measure a limit in a child process. The engine runs in a process of its own, apart
// from the clusters; the raw client must too, or the comparison would favour one side
// (the clusters' garbage collector and goroutines would share a runtime with the client).
const limitCommand = "limit"

// limitOutcome is what a limit child prints on stdout.
type limitOutcome struct {
	Records   int   `json:"records"`
	Bytes     int64 `json:"bytes"`
	ElapsedNs int64 `json:"elapsedNs"`
}

// runLimit is the child side:
//
//	bench limit --mode produce|consume|pipe --config FILE --topic T --partitions P --records N --value-size V
func runLimit(args []string) error {
	fs := flag.NewFlagSet(limitCommand, flag.ContinueOnError)
	mode := fs.String("mode", "", "produce, consume or pipe")
	cfgPath := fs.String("config", "", "MirrorConfig naming the source and target")
	topic := fs.String("topic", "", "topic")
	partitions := fs.Int("partitions", 0, "partitions of the topic")
	records := fs.Int("records", 0, "records to produce or consume")
	valueSize := fs.Int("value-size", 0, "value size")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop, cfg, err := loadChildConfig(*cfgPath)
	if err != nil {
		return err
	}
	defer stop()
	var r rate
	switch *mode {
	case "produce":
		r, err = produceLimit(ctx, cfg, newRecordGen(*valueSize), *topic, int32(*partitions), *records)
	case "consume":
		r, err = consumeLimit(ctx, cfg, *topic, int32(*partitions), *records)
	case "pipe":
		r, err = pipeLimit(ctx, cfg, *topic, int32(*partitions), *records)
	default:
		err = fmt.Errorf("--mode %q is not produce, consume or pipe", *mode)
	}
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(limitOutcome{r.Records, r.Bytes, int64(r.Elapsed)})
}

// limitChild runs one limit measurement in a child process and returns its rate and the
// child's CPU time and peak RSS.
func (b *bench) limitChild(ctx context.Context, mode string, cfg *config.Config, n int) (rate, usage, error) {
	self, err := os.Executable()
	if err != nil {
		return rate{}, usage{}, fmt.Errorf("while locating the benchmark binary: %w", err)
	}
	data, err := config.Marshal(cfg)
	if err != nil {
		return rate{}, usage{}, err
	}
	name := b.runName("limit-" + mode)
	cfgPath := filepath.Join(b.workDir, name+".yaml")
	if err := os.WriteFile(cfgPath, data, 0o600); err != nil {
		return rate{}, usage{}, fmt.Errorf("while writing the %s config: %w", name, err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, self, limitCommand, "--mode", mode, "--config", cfgPath, "--topic", dataTopic,
		"--partitions", strconv.Itoa(b.o.partitions), "--records", strconv.Itoa(n), "--value-size", strconv.Itoa(b.o.valueSize))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// engineproc gives the child its own process group, SIGKILL when the benchmark dies,
	// and samples its peak RSS; stdout and stderr stay the buffers above.
	p, err := engineproc.Start(cmd, engineproc.Options{})
	if err != nil {
		return rate{}, usage{}, fmt.Errorf("while starting the %s child: %w", name, err)
	}
	<-p.Done()
	if err := p.Err(); err != nil {
		return rate{}, usage{}, fmt.Errorf("the %s child failed: %w: %s", name, err, strings.TrimSpace(stderr.String()))
	}
	var out limitOutcome
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		return rate{}, usage{}, fmt.Errorf("while reading the %s child's result %q: %w", name, stdout.String(), err)
	}
	u := usage{MaxRSS: p.PeakRSS(), CPU: p.CPUTime()}
	return rate{Records: out.Records, Bytes: out.Bytes, Elapsed: time.Duration(out.ElapsedNs)}, u, nil
}
