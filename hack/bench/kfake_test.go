package main

import (
	"context"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// TestLimitsAgainstKfake runs the preload and both limit measurements against real
// kfake clusters and checks that every record is counted once with its bytes.
func TestLimitsAgainstKfake(t *testing.T) {
	tests := map[string]struct {
		throttle int64
		records  int
		// minElapsed is the least time the produce may take at the throttle.
		minElapsed time.Duration
	}{
		"unthrottled":            {records: 2000},
		"target throttled 1MB/s": {throttle: 1_000_000, records: 2000, minElapsed: 300 * time.Millisecond},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			const parts = 4
			g := newRecordGen(200)
			src, dst := startPreloaded(ctx, t, g, parts, tc.records, tc.throttle)
			cfg := &config.Config{Source: config.Cluster{BootstrapServers: src}, Target: config.Cluster{BootstrapServers: dst}}
			cfg.Default()

			// Rates are timed from the first record to the last, so they count n-1 records.
			wantRecords, wantBytes := tc.records-1, int64(tc.records-1)*int64(g.recordBytes(0))
			got, err := consumeLimit(ctx, cfg, dataTopic, parts, tc.records)
			if err != nil {
				t.Fatal(err)
			}
			if got.Records != wantRecords || got.Bytes != wantBytes || got.RecordsPerSecond() <= 0 {
				t.Errorf("consume limit = %+v, want %d records and %d bytes", got, wantRecords, wantBytes)
			}

			got, err = produceLimit(ctx, cfg, g, dataTopic, parts, tc.records)
			if err != nil {
				t.Fatal(err)
			}
			if got.Records != wantRecords || got.Bytes != wantBytes {
				t.Errorf("produce limit = %+v, want %d records and %d bytes", got, wantRecords, wantBytes)
			}
			if got.Elapsed < tc.minElapsed {
				t.Errorf("produce took %s, want at least %s at the throttle", got.Elapsed, tc.minElapsed)
			}
			counter, err := newTargetCounter(dst, dataTopic, parts)
			if err != nil {
				t.Fatal(err)
			}
			defer counter.close()
			if n, err := counter.sum(); err != nil || n != int64(tc.records) {
				t.Errorf("target holds %d records (err %v), want %d", n, err, tc.records)
			}
		})
	}
}

func saramaTestConfig() *sarama.Config {
	c := sarama.NewConfig()
	c.Version = sarama.V3_6_0_0
	return c
}

// startPreloaded starts a source and a target cluster (the target throttled to
// throttle bytes/s when not 0), each with dataTopic in parts partitions, closed when
// the test ends; it preloads the source with records of g and returns the addresses.
func startPreloaded(ctx context.Context, t *testing.T, g *recordGen, parts int32, records int, throttle int64) (src, dst []string) {
	t.Helper()
	var addrs [][]string
	for _, c := range []struct {
		name     string
		throttle int64
	}{{"test-source", 0}, {"test-target", throttle}} {
		cl, err := startCluster(c.name, 1, c.throttle)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		admin, err := sarama.NewClusterAdmin(cl.ListenAddrs(), saramaTestConfig())
		if err != nil {
			t.Fatal(err)
		}
		if err := admin.CreateTopic(dataTopic, &sarama.TopicDetail{NumPartitions: parts, ReplicationFactor: -1}, false); err != nil {
			t.Fatal(err)
		}
		_ = admin.Close()
		addrs = append(addrs, cl.ListenAddrs())
	}
	if _, err := preload(ctx, addrs[0], g, dataTopic, parts, 0, records); err != nil {
		t.Fatal(err)
	}
	return addrs[0], addrs[1]
}

// checkCopiedOnce checks the target a copier of the preloaded workload g wrote to:
// each of the parts partitions of dataTopic holds its records/parts records, none lost
// or duplicated, and partition 1 starts with the workload's record 1, its key and
// headers as written.
func checkCopiedOnce(ctx context.Context, t *testing.T, g *recordGen, counter *targetCounter, target []string, parts int32, records int) {
	t.Helper()
	for p := int32(0); p < parts; p++ {
		o, err := counter.client.GetOffset(dataTopic, p, sarama.OffsetNewest)
		if err != nil || o != int64(records)/int64(parts) {
			t.Errorf("target partition %d holds %d records (err %v), want %d: lost or duplicated", p, o, err, int64(records)/int64(parts))
		}
	}
	c, err := sarama.NewConsumer(target, saramaTestConfig())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	pc, err := c.ConsumePartition(dataTopic, 1, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	select {
	case m := <-pc.Messages():
		// Record 1 of the workload is the first in partition 1.
		if string(m.Key) != string(g.key(1)) || len(m.Headers) != 2 || string(m.Headers[0].Key) != headerSeq || string(m.Headers[0].Value) != string(seqBytes(1)) {
			t.Errorf("first record of partition 1 = key %q headers %d, want key %q with 2 headers, seq 1", m.Key, len(m.Headers), g.key(1))
		}
	case <-ctx.Done():
		t.Fatal("no record read back from the target")
	}
}

// TestPipeAgainstKfake checks that the raw pipe copies every record once, into the
// source partition, with its headers.
func TestPipeAgainstKfake(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const parts, records = 4, 3000
	g := newRecordGen(100)
	src, dst := startPreloaded(ctx, t, g, parts, records, 0)
	cfg := &config.Config{Source: config.Cluster{BootstrapServers: src}, Target: config.Cluster{BootstrapServers: dst}}
	cfg.Default()
	got, err := pipeLimit(ctx, cfg, dataTopic, parts, records)
	if err != nil {
		t.Fatal(err)
	}
	if got.Records != records-1 || got.Bytes != int64(records-1)*int64(g.recordBytes(0)) {
		t.Errorf("pipe = %+v, want %d records", got, records-1)
	}
	counter, err := newTargetCounter(dst, dataTopic, parts)
	if err != nil {
		t.Fatal(err)
	}
	defer counter.close()
	checkCopiedOnce(ctx, t, g, counter, dst, parts, records)
}
