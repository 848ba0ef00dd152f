package mirror

import (
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
)

// TestFetchSizeFollowsTheSourceRoundTrip checks that the consumers' fetches ask for
// more per partition when the source is far away (kafka.FetchPartitionBytesFor: sarama
// keeps one fetch per broker, so a fetch of 1 MiB a round trip held the rate to a
// source 100 ms away at 0.6 x a client that pipelines its fetches), and that
// consumer.fetchPartitionBytes, when set, is what they ask for. The source's answers to
// ApiVersions are held 60 ms, which the engine measures as the round trip.
func TestFetchSizeFollowsTheSourceRoundTrip(t *testing.T) {
	for name, tc := range map[string]struct {
		set     int32
		atLeast int32
		atMost  int32
	}{
		"far source":              {atLeast: kafka.FetchPartitionBytesFor(60 * time.Millisecond), atMost: 8 << 20},
		"fetchPartitionBytes set": {set: 512 << 10, atLeast: 512 << 10, atMost: 512 << 10},
	} {
		t.Run(name, func(t *testing.T) {
			const partitions, n = 2, 100
			c := newClusters(t, partitions)
			cfg := c.testConfig(t, func(cfg *config.Config) {
				cfg.Streams = 1
				if tc.set > 0 {
					cfg.Consumer = &config.Consumer{FetchPartitionBytes: tc.set}
				}
			})
			c.source.ControlKey(kmsg.ApiVersions.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
				c.source.KeepControl()
				time.Sleep(60 * time.Millisecond)
				return nil, nil, false
			})
			var mu sync.Mutex
			var sizes []int32
			c.source.ControlKey(kmsg.Fetch.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
				c.source.KeepControl()
				mu.Lock()
				defer mu.Unlock()
				for _, rt := range req.(*kmsg.FetchRequest).Topics {
					for _, rp := range rt.Partitions {
						sizes = append(sizes, rp.PartitionMaxBytes)
					}
				}
				return nil, nil, false
			})
			logs, log := newLogLines(t)
			r := mirrorEvery(t, c, cfg, log, partitions, n)
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(sizes) == 0 {
				t.Fatal("the source got no fetch")
			}
			for _, s := range sizes {
				if s < tc.atLeast || s > tc.atMost {
					t.Fatalf("a fetch asked for %d bytes of a partition, want %d to %d", s, tc.atLeast, tc.atMost)
				}
			}
			sized := logs.count("Sized the consumers' fetches by the source's round trip")
			if want := tc.set == 0; (sized > 0) != want {
				t.Errorf("logged the fetch size from the round trip %d times, want it logged: %v", sized, want)
			}
		})
	}
}
