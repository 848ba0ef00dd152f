package mirror

import (
	"fmt"
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/offsets"
)

// BenchmarkAckPath measures the ack reader's bookkeeping per record (readAcks without
// the producer's channel): counters, histograms, tracker and budgets, for the results
// of produce responses that carry 128 records of each of 8 partitions, read in runs of
// 128 (the reader is behind) or one at a time (the results channel is empty after
// each). The records are Added and admitted beforehand, as the claims do, in the same
// loop.
func BenchmarkAckPath(b *testing.B) {
	for _, run := range []int{outFreeBatch, 1} {
		b.Run(fmt.Sprintf("run=%d", run), func(b *testing.B) { benchmarkAckPath(b, run) })
	}
}

func benchmarkAckPath(b *testing.B, runLen int) {
	const partitions, perResponse = 8, outFreeBatch
	m := newMetrics()
	reg := &partitionRegistry{parts: map[partitionKey]*partitionState{}, m: m}
	s := &sender{budget: newInFlightBudget(1 << 40), records: newInFlightBudget(1 << 40)}
	parts := make([]*partitionState, partitions)
	trackers := make([]*offsets.Tracker, partitions)
	outs := make([]*outMsg, partitions*perResponse)
	for i := range parts {
		parts[i] = reg.get("bench", int32(i))
		trackers[i] = offsets.New(1 << 12)
	}
	for i := range outs {
		outs[i] = &outMsg{}
	}
	run := &ackRun{tickets: make([]offsets.Ticket, 0, outFreeBatch)}
	offset := int64(0)
	now := time.Now()
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; done += len(outs) {
		for i, o := range outs {
			p := i / perResponse
			o.part, o.tracker, o.size, o.budgeted = parts[p], trackers[p], 210, 260
			o.readAt, o.sourceTime = now.Add(-3*time.Millisecond), now.Add(-time.Second)
			o.msg.Offset = -1
			o.ticket = trackers[p].Add(offset, 1)
			_ = s.records.take(1)
			_ = s.budget.take(o.budgeted)
			offset++
		}
		for _, o := range outs {
			if o.tracker != run.tracker || len(run.tickets) == runLen {
				run.end(s)
			}
			run.add(o, now)
			o.reset()
		}
		run.end(s)
	}
}
