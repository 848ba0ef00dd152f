package mirror

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/offsets"
)

// watchDelivery enforces deliveryTimeout, as Java's delivery.timeout.ms does: when the
// oldest un-acked record the producer holds has waited longer than deliveryTimeout,
// the engine stops with an error naming it. That holds for assigned partitions and
// for released ones whose records are still in the producer (a drain that gave up):
// Run keeps the watch going until it returns.
//
// The producer is configured (kafka.ProducerConfig) to keep retrying, in order, for at
// least deliveryTimeout, including while it cannot find a partition's leader; it does
// not itself count time per record, so this watch is what turns "the target has not
// taken this record for deliveryTimeout" into the fatal error.
//
// The watch samples every partition's commit point (its smallest un-acked offset). A
// commit point seen unchanged, with records in flight, for deliveryTimeout means the
// record at it has been un-acked at least that long: the watch never gives up early,
// and late by at most one tick.
func (e *Engine) watchDelivery(ctx context.Context) {
	timeout := e.cfg.DeliveryTimeout.Duration
	if timeout <= 0 {
		return
	}
	tick := min(time.Second, max(timeout/10, 10*time.Millisecond))
	t := time.NewTicker(tick)
	defer t.Stop()
	stalls := map[*offsets.Tracker]*stall{}
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.failed:
			return
		case now := <-t.C:
			if err := e.checkDelivery(stalls, now, timeout); err != nil {
				e.fail(err)
				return
			}
		}
	}
}

// stall is where a tracker's commit point was first seen and when.
type stall struct {
	offset int64
	since  time.Time
	seen   bool // in the last round
}

// checkDelivery looks at every tracker with records in the producer: those of assigned
// partitions and those of released ones whose records are still on their way (a drain
// that gave up, a shutdown), so the watch holds across reassignment.
func (e *Engine) checkDelivery(stalls map[*offsets.Tracker]*stall, now time.Time, timeout time.Duration) error {
	for _, s := range stalls {
		s.seen = false
	}
	for _, p := range e.parts.all() {
		for _, w := range p.watched() {
			cp, _ := w.tracker.CommitPoint()
			s, ok := stalls[w.tracker]
			if !ok || s.offset != cp {
				stalls[w.tracker] = &stall{offset: cp, since: now, seen: true}
				continue
			}
			s.seen = true
			if waited := now.Sub(s.since); waited >= timeout {
				return fmt.Errorf("while writing source record %s/%d offset %d to the target cluster [%s]: not acknowledged within deliveryTimeout %v "+
					"(the target was unreachable or did not accept the record for that long; the producer retried all the while)",
					p.topic, p.partition, cp, strings.Join(e.cfg.Target.BootstrapServers, ","), timeout)
			}
		}
	}
	for tr, s := range stalls {
		if !s.seen {
			delete(stalls, tr)
		}
	}
	return nil
}
