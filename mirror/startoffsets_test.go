package mirror

import (
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// TestSetupReadsInitialOffsetsOncePerBroker checks that a Setup reads the initialOffset
// of all its partitions that no group has an offset for with one ListOffsets request per
// source broker, not one request (one round trip, one after the other) per partition:
// with the source 100 ms away, eight partitions cost 0.8 s of the start.
//
// The Setup's reads are told from the consumer's by their order: sarama's consumer asks
// a partition's newest offset before its oldest, the Setup asks only the oldest, before
// any claim starts.
func TestSetupReadsInitialOffsetsOncePerBroker(t *testing.T) {
	const partitions, n = 8, 400
	c := newClusters(t, partitions)
	cfg := c.testConfig(t, func(cfg *config.Config) { cfg.Streams = 1 })
	logs, log := newLogLines(t)
	var mu sync.Mutex
	askedNewest := map[int32]bool{}
	setupReads := 0 // requests with a partition's oldest offset asked before its newest
	setupParts := map[int32]bool{}
	c.source.ControlKey(kmsg.ListOffsets.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.source.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		setup := false
		for _, rt := range req.(*kmsg.ListOffsetsRequest).Topics {
			if rt.Topic != testTopic {
				continue
			}
			for _, rp := range rt.Partitions {
				switch {
				case rp.Timestamp == -1:
					askedNewest[rp.Partition] = true
				case rp.Timestamp == -2 && !askedNewest[rp.Partition]:
					setup = true
					setupParts[rp.Partition] = true
				}
			}
		}
		if setup {
			setupReads++
		}
		return nil, nil, false
	})
	r := mirrorEvery(t, c, cfg, log, partitions, n)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if got := logs.count("Started partition at initialOffset"); got < partitions {
		t.Fatalf("%d partitions started at initialOffset, want at least %d (a first start)", got, partitions)
	}
	joins := logs.count("Joined the consumer group")
	mu.Lock()
	defer mu.Unlock()
	if len(setupParts) != partitions {
		t.Errorf("the Setup read the oldest offset of %d partitions before the consumer, want %d", len(setupParts), partitions)
	}
	// One source broker: one request per Setup.
	if setupReads > joins {
		t.Errorf("the Setups read the initial offsets of %d partitions in %d ListOffsets requests over %d sessions, want at most one per session and broker",
			partitions, setupReads, joins)
	}
}

// mirrorEvery writes n records to each of the source's partitions, starts the engine
// with cfg, and waits until the target holds every one of them once; it returns the
// running engine.
func mirrorEvery(t *testing.T, c *testClusters, cfg *config.Config, log logr.Logger, partitions int32, n int) *runningEngine {
	t.Helper()
	w := newWorkload(partitions)
	w.produce(t, c.source, n)
	r := startEngine(t, cfg, log)
	got := readTarget(t, c.target, testTopic, w.total(), time.Second, time.Minute)
	if res := audit(t, w, got, true, true); res.missing != 0 || res.duplicates != 0 {
		t.Errorf("%d missing, %d duplicates, want 0 and 0", res.missing, res.duplicates)
	}
	return r
}
