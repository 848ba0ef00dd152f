package mirror

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/IBM/sarama"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/offsets"
)

// Limits of one caught-up probe: it reads at most catchUpMaxFetches responses of
// catchUpFetchBytes each; a longer run of invisible offsets (a huge aborted
// transaction) keeps its lag until records follow it.
// A broker returns at least one whole batch whatever the limit, so a small limit
// only bounds what a probe reads past the first visible record.
const (
	catchUpFetchBytes = 64 << 10
	catchUpMaxFetches = 16
)

// fetchVersion is the Fetch request version of the probe: 12 is what sarama's own
// consumer uses with kafka.Version (3.6).
const fetchVersion = 12

// controlTypeAbort is the type of a transaction's abort marker in a control record's key
// (version int16, type int16; 0 = abort, 1 = commit).
const controlTypeAbort = 0

// caughtUp moves the commit point of an idle partition past the offsets the consumer
// never delivers: the markers a transactional producer writes when it commits or aborts
// (each takes an offset), and with read_committed the records of aborted transactions.
// Without it the commit point of a partition whose last write was a transaction stops
// at the marker, one below the end, and its lag never reaches 0.
//
// The commit point may pass an offset only when no record at or above it and below
// the new point will ever be delivered, and sarama does not say how far its consumer
// got. So a probe reads the partition itself, from the commit point, with the
// consumer's isolation level: when every offset between the commit point and the end
// (the last stable offset with read_committed, else the high watermark) is a control
// record or, with read_committed, part of an aborted transaction, that end is the new
// commit point. offsets.Tracker.AdvanceIdle applies it only if the partition is still
// idle at the same commit point, so a record read meanwhile wins.
type caughtUp struct {
	client    sarama.Client // the source admin's client
	isolation sarama.IsolationLevel
	wg        sync.WaitGroup
}

func newCaughtUp(client sarama.Client, readCommitted bool) *caughtUp {
	c := &caughtUp{client: client, isolation: sarama.ReadUncommitted}
	if readCommitted {
		c.isolation = sarama.ReadCommitted
	}
	return c
}

// probeIdle starts a probe of each of the session's claims that has been idle (nothing
// in flight) at the same commit point, below the high watermark its consumer last saw,
// since the previous commit interval, one probe per partition at a time. A partition
// that moves is never probed, so steady traffic costs nothing; one stuck at a marker
// is probed after one interval. The commit that follows picks up what a probe moved.
func (e *Engine) probeIdle(ss *sessionState) {
	if e.caughtUp == nil || e.isFailed() {
		return
	}
	ss.mu.Lock()
	claims := append([]*claimState(nil), ss.claims...)
	ss.mu.Unlock()
	for _, c := range claims {
		if c.tracker.InFlight() > 0 {
			c.part.idleAt.Store(-1)
			continue
		}
		from, ok := c.tracker.CommitPoint()
		if !ok {
			// Nothing read in this assignment: the commit point is where the claim started.
			from = c.part.startOffset()
		}
		if from < 0 || c.part.highWatermark() <= from {
			c.part.idleAt.Store(-1)
			continue
		}
		if c.part.idleAt.Swap(from) != from || !c.part.probing.CompareAndSwap(false, true) {
			continue
		}
		e.caughtUp.wg.Add(1)
		go func() {
			defer e.caughtUp.wg.Done()
			defer c.part.probing.Store(false)
			e.caughtUp.advance(c.topic, c.part.partition, c.tracker, from)
		}()
	}
}

// advance moves tracker's commit point from from to the partition's end when nothing
// between them will ever be delivered.
func (c *caughtUp) advance(topic string, partition int32, tracker *offsets.Tracker, from int64) {
	end, ok, err := c.invisibleUpTo(topic, partition, from)
	if err != nil || !ok || end <= from {
		return
	}
	tracker.AdvanceIdle(from, end)
}

// wait returns when every probe ended. Run calls it after closing the clients, which
// ends a probe still waiting for an answer.
func (c *caughtUp) wait() {
	if c != nil {
		c.wg.Wait()
	}
}

// invisibleUpTo reads topic/partition from from and reports the partition's end (last
// stable offset, or high watermark with read_uncommitted) when no record between from
// and the end is visible to the consumer.
func (c *caughtUp) invisibleUpTo(topic string, partition int32, from int64) (int64, bool, error) {
	broker, err := c.client.Leader(topic, partition)
	if err != nil {
		return 0, false, fmt.Errorf("while finding the leader of source partition %s/%d: %w", topic, partition, err)
	}
	aborted := map[int64]bool{} // producer IDs inside an aborted transaction
	end := int64(-1)
	pos := from
	for range catchUpMaxFetches {
		req := &sarama.FetchRequest{Version: fetchVersion, MaxBytes: catchUpFetchBytes, Isolation: c.isolation, SessionEpoch: -1}
		req.AddBlock(topic, partition, pos, catchUpFetchBytes, -1)
		resp, err := broker.Fetch(req)
		if err != nil {
			return 0, false, fmt.Errorf("while reading source partition %s/%d: %w", topic, partition, err)
		}
		b := resp.GetBlock(topic, partition)
		if b == nil {
			return 0, false, sarama.ErrIncompleteResponse
		}
		if !errors.Is(b.Err, sarama.ErrNoError) {
			return 0, false, b.Err
		}
		if end < 0 {
			end = b.HighWaterMarkOffset
			if c.isolation == sarama.ReadCommitted {
				end = b.LastStableOffset
			}
			if end <= from {
				return end, false, nil
			}
		}
		txns := append([]*sarama.AbortedTransaction(nil), b.AbortedTransactions...)
		sort.Slice(txns, func(i, j int) bool { return txns[i].FirstOffset < txns[j].FirstOffset })
		covered := pos
		for _, recs := range b.RecordsSet {
			batch := recs.RecordBatch
			if batch == nil {
				// A legacy message set (no control records in it) cannot be proven here.
				return 0, false, nil
			}
			if batch.PartialTrailingRecord {
				break
			}
			last := batch.FirstOffset + int64(batch.LastOffsetDelta)
			for len(txns) > 0 && txns[0].FirstOffset <= last {
				aborted[txns[0].ProducerID] = true
				txns = txns[1:]
			}
			covered = max(covered, last+1)
			switch {
			case batch.Control:
				if isAbortMarker(batch) {
					delete(aborted, batch.ProducerID)
				}
				continue
			case last < from || batch.FirstOffset >= end:
				continue
			case c.isolation == sarama.ReadCommitted && batch.IsTransactional && aborted[batch.ProducerID]:
				continue
			}
			for _, r := range batch.Records {
				if off := batch.FirstOffset + r.OffsetDelta; off >= from && off < end {
					return end, false, nil // a record the consumer delivers
				}
			}
		}
		if covered >= end {
			return end, true, nil
		}
		if covered == pos {
			return end, false, nil // no progress: nothing more to read
		}
		pos = covered
	}
	return end, false, nil
}

// isAbortMarker reports whether a control batch holds a transaction's abort marker.
func isAbortMarker(batch *sarama.RecordBatch) bool {
	if len(batch.Records) == 0 {
		return false
	}
	key := batch.Records[0].Key
	return len(key) >= 4 && binary.BigEndian.Uint16(key[2:4]) == controlTypeAbort
}
