package mirror

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// TestStreamFindsItsCoordinatorWhileTheTopicLoopRuns checks that a stream's source
// client, and the consumer group's coordinator, are found while the first topic loop
// runs and the producers start, not after them: across a distance a new client and
// FindCoordinator were three round trips of the start, one after the other (the join
// itself asks again later: sarama's offset manager refreshes the coordinator). The first
// topic loop is held a second (the target's first DescribeConfigs), so the order does
// not depend on the machine's speed.
func TestStreamFindsItsCoordinatorWhileTheTopicLoopRuns(t *testing.T) {
	const partitions, n = 2, 100
	c := newClusters(t, partitions)
	cfg := c.testConfig(t, func(cfg *config.Config) { cfg.Streams = 1 })
	_, log := newLogLines(t)
	var mu sync.Mutex
	held, producing, joining := false, false, false
	late := 0 // FindCoordinator requests for the group after the first InitProducerId, before the first JoinGroup
	c.target.ControlKey(kmsg.DescribeConfigs.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.target.KeepControl()
		mu.Lock()
		first := !held
		held = true
		mu.Unlock()
		if first {
			time.Sleep(time.Second)
		}
		return nil, nil, false
	})
	c.target.ControlKey(kmsg.InitProducerID.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.target.KeepControl()
		mu.Lock()
		producing = true
		mu.Unlock()
		return nil, nil, false
	})
	c.source.ControlKey(kmsg.FindCoordinator.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.source.KeepControl()
		r := req.(*kmsg.FindCoordinatorRequest)
		asks := r.CoordinatorKeys
		if r.CoordinatorKey != "" {
			asks = append(asks, r.CoordinatorKey)
		}
		mu.Lock()
		defer mu.Unlock()
		if producing && !joining && slices.Contains(asks, cfg.ConsumerGroup) {
			late++
		}
		return nil, nil, false
	})
	c.source.ControlKey(kmsg.JoinGroup.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.source.KeepControl()
		mu.Lock()
		joining = true
		mu.Unlock()
		return nil, nil, false
	})
	r := mirrorEvery(t, c, cfg, log, partitions, n)
	mu.Lock()
	lateBeforeStop, wasHeld := late, held
	mu.Unlock()
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if !wasHeld {
		t.Fatal("the target never got a DescribeConfigs: the test holds nothing")
	}
	if lateBeforeStop != 0 {
		t.Errorf("the source got %d FindCoordinator requests for group %q after the producers started and before the join: the stream's client was made after them", lateBeforeStop, cfg.ConsumerGroup)
	}
}
