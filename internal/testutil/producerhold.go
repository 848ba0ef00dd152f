package testutil

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ProducerHold watches the produce requests a kfake cluster receives for one topic and,
// once told to, holds those of chosen producer ids without answering them, while every
// other client (another process's producer, the same process's offset sync writer) goes
// on: the records of a process whose requests are held stay in flight, as they do
// behind a slow or partitioned broker, and land when Release lets them through, after
// whatever the others wrote meanwhile. A held request sleeps in kfake's control (it
// does not block the cluster), so it must be released before the producer's read
// timeout (sarama: 30 s) to keep a single copy of each batch.
type ProducerHold struct {
	cl    *kfake.Cluster
	topic string

	mu       sync.Mutex
	seen     map[int64]bool // producer ids seen writing topic
	held     map[int64]bool
	released chan struct{}
	holding  atomic.Int64
}

// HoldProducers starts watching cl's produce requests for topic. Nothing is held
// until Hold.
func HoldProducers(cl *kfake.Cluster, topic string) *ProducerHold {
	h := &ProducerHold{cl: cl, topic: topic, seen: map[int64]bool{}, held: map[int64]bool{}, released: make(chan struct{})}
	cl.ControlKey(kmsg.Produce.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		cl.KeepControl()
		if pid, ok := h.producerOf(req.(*kmsg.ProduceRequest)); ok && h.shouldHold(pid) {
			h.holding.Add(1)
			cl.SleepControl(func() { <-h.released })
			h.holding.Add(-1)
		}
		return nil, nil, false
	})
	return h
}

// producerOf returns the producer id of req's first record batch for the watched topic.
func (h *ProducerHold) producerOf(req *kmsg.ProduceRequest) (int64, bool) {
	for _, t := range req.Topics {
		if t.Topic != h.topic {
			continue
		}
		for _, p := range t.Partitions {
			var b kmsg.RecordBatch
			if err := b.ReadFrom(p.Records); err == nil && b.ProducerID >= 0 {
				return b.ProducerID, true
			}
		}
	}
	return 0, false
}

func (h *ProducerHold) shouldHold(pid int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen[pid] = true
	select {
	case <-h.released:
		return false
	default:
		return h.held[pid]
	}
}

// Seen returns the idempotent producer ids that wrote the topic so far.
func (h *ProducerHold) Seen() []int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []int64
	for pid := range h.seen {
		out = append(out, pid)
	}
	slices.Sort(out)
	return out
}

// Hold holds every later produce request of pids to the topic until Release.
func (h *ProducerHold) Hold(pids ...int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, pid := range pids {
		h.held[pid] = true
	}
}

// Holding returns the number of requests held now.
func (h *ProducerHold) Holding() int64 { return h.holding.Load() }

// Release lets the held requests through, in the order they came, and holds nothing
// more. It may be called once.
func (h *ProducerHold) Release() { close(h.released) }
