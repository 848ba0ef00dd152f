package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
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
//	bench limit --mode produce|consume --config FILE --topic T --partitions P --records N --value-size V
func runLimit(args []string) error {
	fs := flag.NewFlagSet(limitCommand, flag.ContinueOnError)
	mode := fs.String("mode", "", "produce or consume")
	cfgPath := fs.String("config", "", "MirrorConfig naming the source and target")
	topic := fs.String("topic", "", "topic")
	partitions := fs.Int("partitions", 0, "partitions of the topic")
	records := fs.Int("records", 0, "records to produce or consume")
	valueSize := fs.Int("value-size", 0, "value size")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var r rate
	switch *mode {
	case "produce":
		r, err = produceLimit(ctx, cfg, newRecordGen(*valueSize), *topic, int32(*partitions), *records)
	case "consume":
		r, err = consumeLimit(ctx, cfg, *topic, int32(*partitions), *records)
	default:
		err = fmt.Errorf("--mode %q is not produce or consume", *mode)
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
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return rate{}, usage{}, fmt.Errorf("while starting the %s child: %w", name, err)
	}
	p := &engineProcess{cmd: cmd}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		select {
		case err := <-waited:
			if err != nil {
				return rate{}, usage{}, fmt.Errorf("the %s child failed: %w: %s", name, err, strings.TrimSpace(stderr.String()))
			}
			var out limitOutcome
			if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
				return rate{}, usage{}, fmt.Errorf("while reading the %s child's result %q: %w", name, stdout.String(), err)
			}
			u := usage{MaxRSS: p.hwm.Load()}
			if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
				u.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
			}
			return rate{Records: out.Records, Bytes: out.Bytes, Elapsed: time.Duration(out.ElapsedNs)}, u, nil
		case <-tick.C:
			p.sampleRSS()
		}
	}
}
