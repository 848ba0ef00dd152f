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
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.failed:
			return
		case <-t.C:
			// The clock, not the tick's value: a tick that fires late carries the time
			// it was due, which would hide a time the process was stopped.
			now := time.Now()
			err := e.deliveryTick(stalls, last, now, tick, timeout)
			last = now
			if err != nil {
				e.fail(err)
				return
			}
		}
	}
}

// deliveryTick is one look of the watch at now, its previous one at last: a time the
// process did not run in between is not counted (stoppedFor), then checkDelivery.
func (e *Engine) deliveryTick(stalls map[*offsets.Tracker]*stall, last, now time.Time, tick, timeout time.Duration) error {
	if stopped := stoppedFor(last, now, tick); stopped > 0 {
		e.log.Info("The process did not run for a while; the delivery watch does not count that time against deliveryTimeout",
			"stopped", stopped.Round(time.Millisecond))
		for _, s := range stalls {
			s.since = s.since.Add(stopped)
		}
	}
	return e.checkDelivery(stalls, now, timeout)
}

// watchStopSlack is how much later than its tick the delivery watch may wake before
// it takes the delay for a time the process did not run (SIGSTOP, a frozen VM) rather
// than a busy machine.
const watchStopSlack = 5 * time.Second

// stoppedFor returns how long the process did not run between the watch's ticks at
// last and now, tick apart, or 0. deliveryTimeout is the time the target had to take
// a record: while the process is stopped it can read no ack, and a member resumed
// after its partitions moved (a zombie) must go on long enough to learn it was
// fenced or its session ended, not fail on its own watch first.
func stoppedFor(last, now time.Time, tick time.Duration) time.Duration {
	if late := now.Sub(last) - tick; late > watchStopSlack {
		return late
	}
	return 0
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
				if e.cfg.ExactlyOnce() {
					return fmt.Errorf("while writing source record %s/%d offset %d to the target cluster [%s]: its transaction was not committed within deliveryTimeout %v "+
						"(the target was unreachable or did not accept the records or the commit for that long; the producer retried all the while)",
						p.topic, p.partition, cp, strings.Join(e.cfg.Target.BootstrapServers, ","), timeout)
				}
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
