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
			src, err := startCluster("test-source", 1, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			dst, err := startCluster("test-target", 1, tc.throttle)
			if err != nil {
				t.Fatal(err)
			}
			defer dst.Close()
			for _, c := range [][]string{src.ListenAddrs(), dst.ListenAddrs()} {
				admin, err := sarama.NewClusterAdmin(c, saramaTestConfig())
				if err != nil {
					t.Fatal(err)
				}
				if err := admin.CreateTopic(dataTopic, &sarama.TopicDetail{NumPartitions: parts, ReplicationFactor: -1}, false); err != nil {
					t.Fatal(err)
				}
				_ = admin.Close()
			}
			if _, err := preload(ctx, src.ListenAddrs(), g, dataTopic, parts, 0, tc.records); err != nil {
				t.Fatal(err)
			}
			cfg := &config.Config{Source: config.Cluster{BootstrapServers: src.ListenAddrs()}, Target: config.Cluster{BootstrapServers: dst.ListenAddrs()}}
			cfg.Default()

			wantBytes := int64(tc.records) * int64(g.recordBytes(0))
			got, err := consumeLimit(ctx, cfg, dataTopic, parts, tc.records)
			if err != nil {
				t.Fatal(err)
			}
			if got.Records != tc.records || got.Bytes != wantBytes || got.RecordsPerSecond() <= 0 {
				t.Errorf("consume limit = %+v, want %d records and %d bytes", got, tc.records, wantBytes)
			}

			got, err = produceLimit(ctx, cfg, g, dataTopic, parts, tc.records)
			if err != nil {
				t.Fatal(err)
			}
			if got.Records != tc.records || got.Bytes != wantBytes {
				t.Errorf("produce limit = %+v, want %d records and %d bytes", got, tc.records, wantBytes)
			}
			if got.Elapsed < tc.minElapsed {
				t.Errorf("produce took %s, want at least %s at the throttle", got.Elapsed, tc.minElapsed)
			}
			counter, err := newTargetCounter(dst.ListenAddrs(), dataTopic, parts)
			if err != nil {
				t.Fatal(err)
			}
			defer counter.close()
			if n, err := counter.count(); err != nil || n != int64(tc.records) {
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
