package main

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/IBM/sarama"
)

// largeTopic holds the large records of the large-record run.
const largeTopic = "bench.large"

// largeResult is the run with large records against a throttled target: memory must be
// bounded by maxInFlightBytes (plus the consumer's read-ahead), not by the record count.
type largeResult struct {
	ValueSize        int           `json:"valueSize"`
	Partitions       int           `json:"partitions"`
	MaxInFlightBytes int64         `json:"maxInFlightBytes"`
	BytesPerSecond   int64         `json:"targetBytesPerSecond"`
	Duration         time.Duration `json:"durationNs"`
	// PeakInFlightBytes is the most kafka_mirror_inflight_bytes seen.
	PeakInFlightBytes int64 `json:"peakInFlightBytes"`
	// Records is what the engine mirrored during the run.
	Records int64 `json:"records"`
	MaxRSS  int64 `json:"maxRSSBytes"`
}

// readAhead is what the budget does not cover: per partition, the consumer's channel
// (kafka.ConsumerChannelBuffer records, 256) and the fetch being handed over (1 MiB).
func (l largeResult) readAhead() int64 {
	return int64(l.Partitions) * (256*int64(l.ValueSize) + 1<<20)
}

func (l largeResult) rate() float64 {
	if l.Duration <= 0 {
		return 0
	}
	return float64(l.Records) / l.Duration.Seconds()
}

// large preloads --large-records records of --large-value-size bytes and mirrors them
// into a target throttled to --throttle bytes per second for --throttle-duration, with
// maxInFlightBytes set to --large-inflight-bytes, sampling the engine's peak RSS and the
// bytes in flight.
func (b *bench) large(ctx context.Context) (largeResult, error) {
	res := largeResult{ValueSize: b.o.largeValueSize, Partitions: b.o.partitions, MaxInFlightBytes: b.o.largeInFlight,
		BytesPerSecond: b.o.throttle, Duration: b.o.throttleTime}
	if err := b.srcAdmin.CreateTopic(largeTopic, &sarama.TopicDetail{NumPartitions: int32(b.o.partitions), ReplicationFactor: -1}, false); err != nil {
		return res, fmt.Errorf("while creating source topic %q: %w", largeTopic, err)
	}
	b.logf("Preloading %d records of %d bytes into %s", b.o.largeRecords, b.o.largeValueSize, largeTopic)
	if _, err := preload(ctx, b.srcBrokers, newRecordGen(b.o.largeValueSize), largeTopic, int32(b.o.partitions), 0, b.o.largeRecords); err != nil {
		return res, err
	}
	spec := engineSpec{name: "large", noDataLoss: true, streams: b.o.streams, maxInFlightBytes: b.o.largeInFlight}
	err := b.withTarget(ctx, spec.name, b.o.throttle, largeTopic, func(target []string) error {
		p, addr, err := b.launch(b.engineBin, spec, spec.name, largeTopic, target)
		if err != nil {
			return err
		}
		end := time.After(b.o.throttleTime)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				stopEngine(p, syscall.SIGKILL, 5*time.Second)
				return ctx.Err()
			case <-p.Done():
				return p.ExitedError()
			case <-end:
				// A drain against the throttled target would only cost time: kill it.
				res.MaxRSS = stopEngine(p, syscall.SIGKILL, 5*time.Second).MaxRSS
				return nil
			case <-tick.C:
				fams, err := scrape(ctx, addr)
				if err != nil {
					continue
				}
				res.PeakInFlightBytes = max(res.PeakInFlightBytes, int64(fams.Sum("kafka_mirror_inflight_bytes")))
				res.Records = int64(fams.Sum("kafka_mirror_records_total"))
			}
		}
	})
	if err == nil {
		b.logf("  throttled target, %d-byte records, maxInFlightBytes %s: %s in flight at most, %.0f records/s, peak RSS %s",
			res.ValueSize, fmtBytes(res.MaxInFlightBytes), fmtBytes(res.PeakInFlightBytes), res.rate(), fmtBytes(res.MaxRSS))
	}
	return res, err
}
