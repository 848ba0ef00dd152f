package mirror

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/go-logr/logr"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/handler"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/offsets"
)

// The exactly-once path (delivery: exactlyOnce, docs/exactly-once.md). Each source
// partition has its own transactional producer, whose transactional id names the
// partition (txnID). A session's Setup opens the producers of its claims, which fences
// the partitions' previous owners (InitProducerId bumps the epoch and aborts their
// open transaction), and only then reads how far each partition was mirrored from the
// target-side group (ProgressGroup), where every transaction wrote it together with
// its records; the claim starts there. A claim then mirrors in transactions of at most
// transactionInterval: records, then the next source offset (TxnOffsetCommit), then
// EndTxn. The source group's offset follows after each commit, for lag and people; it
// is never read back while a target-side offset exists.
//
// With groups set, the records of a committed transaction are then shown to the offset
// sync writer (offsetsync.go) in order, as the at-least-once path shows it each ack, so
// that it decides when to write a sync the same way; a sync therefore never names a
// record of a transaction that was aborted or never committed. With provenance on,
// records are judged and stamped as on the at-least-once path (provenance.go); a
// dropped record moves the offset inside its transaction like a filtered one.

// Bounds of the transaction timeout the target enforces (txnTimeoutFor): an open
// transaction of a process that died and whose partition nobody took over is aborted
// after it, and read_committed consumers of that partition wait at most that long.
const (
	minTxnTimeout    = time.Minute
	txnTimeoutMargin = 30 * time.Second
)

// txnTimeoutFor is the transaction timeout for deliveryTimeout: longer than the engine
// waits for the target (so that an outage the engine rides out does not make the target
// abort the transaction meanwhile), and at least minTxnTimeout.
func txnTimeoutFor(deliveryTimeout time.Duration) time.Duration {
	return max(minTxnTimeout, deliveryTimeout+txnTimeoutMargin)
}

// txnRetryBackoff spaces the retries of the transaction requests (AddPartitionsToTxn,
// AddOffsetsToTxn, TxnOffsetCommit, EndTxn), which retry for deliveryTimeout.
const txnRetryBackoff = 250 * time.Millisecond

// txnProgressMetadata marks a target-side entry written inside a transaction: it is
// the source of truth, unlike the at-least-once keeper's (progressMetadata), which is
// a backup of the source group's offset.
func txnProgressMetadata(topic string, partition int32) string {
	return fmt.Sprintf("kafka-mirror exactly-once source offset of %s/%d", topic, partition)
}

// txnID is the transactional id of a source partition. A topic name cannot hold '/',
// so the id names one partition of one group.
func txnID(group, topic string, partition int32) string {
	return fmt.Sprintf("%s/%s/%d", group, topic, partition)
}

// exactlyOnce holds the transactional producers that sessions opened (and so fenced
// with) for their claims, until each claim takes its own.
type exactlyOnce struct {
	e *Engine

	mu      sync.Mutex
	writers map[claimKey]*txnWriter

	// committed, failed and fenced count transactions, and leftOpen the claims that
	// ended with a transaction open (a kill, a fatal error, a commit past the drain),
	// for tests and logs. open counts the producers opened and not closed yet.
	committed, failed, fenced, leftOpen, open atomic.Int64
}

func newExactlyOnce(e *Engine) *exactlyOnce {
	return &exactlyOnce{e: e, writers: map[claimKey]*txnWriter{}}
}

// claimKey names one claim: a partition in one session of one member, so that a claim
// never takes the producer another session opened.
type claimKey struct {
	partitionKey
	member     string
	generation int32
}

func keyOf(sess sarama.ConsumerGroupSession, tp partitionKey) claimKey {
	return claimKey{tp, sess.MemberID(), sess.GenerationID()}
}

// take hands the claim of tp the producer its session opened.
func (x *exactlyOnce) take(sess sarama.ConsumerGroupSession, tp partitionKey) *txnWriter {
	x.mu.Lock()
	defer x.mu.Unlock()
	w := x.writers[keyOf(sess, tp)]
	delete(x.writers, keyOf(sess, tp))
	return w
}

// put keeps w for its claim, closing those of the partition that earlier sessions
// opened and whose claims never started.
func (x *exactlyOnce) put(sess sarama.ConsumerGroupSession, tp partitionKey, w *txnWriter) {
	var stale []*txnWriter
	x.mu.Lock()
	for k, old := range x.writers {
		if k.partitionKey == tp {
			stale = append(stale, old)
			delete(x.writers, k)
		}
	}
	x.writers[keyOf(sess, tp)] = w
	x.mu.Unlock()
	for _, old := range stale {
		// In the background, as release does: Setup must not wait for a target that hangs.
		go old.close()
	}
}

// release closes the producers sess opened for claims that never started: the
// session ended before sarama started them, or their partition consumer could not
// start (an offset out of range). Left in writers, each kept a client and its
// connections until a later session of the same partition replaced it, which may
// never come. Cleanup calls it once every claim of sess has returned.
func (x *exactlyOnce) release(sess sarama.ConsumerGroupSession) {
	var left []*txnWriter
	x.mu.Lock()
	for k, w := range x.writers {
		if k.member == sess.MemberID() && k.generation == sess.GenerationID() {
			left = append(left, w)
			delete(x.writers, k)
		}
	}
	x.mu.Unlock()
	for _, w := range left {
		// Closing waits for the client's brokers, which a target that hangs holds.
		go w.close()
	}
}

// assign runs in a session's Setup, before any claim starts: it fences every claimed
// partition's previous owner by opening the partition's transactional producer, then
// moves each claim's start to the offset the target-side group holds for it. Fencing
// comes first: the previous owner's open transaction is aborted (or its commit
// completed) before the offset is read, so the offset read is final. A partition
// without a target-side offset starts at the source group's offset (a mirror that ran
// at-least-once before), else at initialOffset. A position of another incarnation of
// the topic is never used (incarnation.go): the partition starts at the beginning of
// the topic as it is now.
//
// The fencing and the reads run on their own and assign waits for them only while the
// session lasts and the engine has not failed: a target that swallows the requests
// (each waits for sarama's read timeout, and InitProducerId is retried for about
// deliveryTimeout) must not hold a stop or a rebalance, which end the session, past
// the drain. Producers that open after assign gave up are closed as they open.
func (x *exactlyOnce) assign(sess sarama.ConsumerGroupSession, source sarama.Client, ids map[string]string, log logr.Logger) error {
	e := x.e
	done := make(chan fencedClaims, 1)
	claims := sess.Claims()
	ctx, giveUp := context.WithCancel(context.Background())
	defer giveUp()
	go func() { done <- x.fence(ctx, claims) }()
	var f fencedClaims
	select {
	case f = <-done:
	case <-sess.Context().Done():
		giveUp()
		go func() { (<-done).closeAll() }()
		return fmt.Errorf("while fencing the previous owners of the claimed partitions: the session ended: %w", sess.Context().Err())
	case <-e.failed:
		giveUp()
		go func() { (<-done).closeAll() }()
		return errStopped
	}
	if f.err != nil {
		return f.err
	}
	writers, tgt, src := f.writers, f.tgt, f.src
	k := e.keeper
	closeAll := f.closeAll
	// The progress topic is read once, when a partition no group has an offset for needs it.
	var marks map[partitionKey]position
	var starts map[partitionKey]int64 // initialOffsets of the claims, read once when needed
	for tp := range writers {
		id := ids[tp.topic]
		// The target entry: written in a transaction, or by an at-least-once run (a
		// backup of the source group's offset).
		var txnEntry, alEntry entryVerdict
		var stored string
		b := blockOf(tgt, k.targetName(tp.topic), tp.partition)
		if b != nil && errors.Is(b.Err, sarama.ErrNoError) && b.Offset >= 0 {
			if txnEntry, stored = judgeEntry(b.Metadata, txnProgressMetadata(tp.topic, tp.partition), id); txnEntry == entryForeign {
				alEntry, stored = judgeEntry(b.Metadata, progressMetadata(tp.topic, tp.partition), id)
			}
		}
		srcOff, srcEntry, srcStored := int64(-1), entryForeign, ""
		if sb := blockOf(src, tp.topic, tp.partition); sb != nil && errors.Is(sb.Err, sarama.ErrNoError) {
			srcOff = sb.Offset
			srcEntry, srcStored = judgeEntry(sb.Metadata, sourceCommitMetadata, id)
		}
		var err error
		switch {
		case txnEntry.usable() && srcEntry != entryOtherIncarnation && srcOff > b.Offset:
			// The engine commits the source group's offset only after the transaction
			// that stored the same offset committed, so an offset ahead of the last
			// transaction's was put there: a reset that accepts records deleted before
			// they were mirrored (the remedy outOfRangeError names), or an at-least-once
			// run after this one. Offsets the caught-up probe passed hold no record.
			seek(sess, tp, srcOff)
			log.Info("Started from the source group's offset, which is ahead of the offset in the last target transaction; the offsets between them are not mirrored",
				"topic", tp.topic, "partition", tp.partition, "offset", srcOff, "transactionOffset", b.Offset)
		case txnEntry.usable():
			seek(sess, tp, b.Offset)
			log.V(1).Info("Resumed from the offset committed in the last target transaction",
				"topic", tp.topic, "partition", tp.partition, "offset", b.Offset, "sourceGroupOffset", srcOff)
		case txnEntry == entryOtherIncarnation || alEntry == entryOtherIncarnation:
			err = e.restartIncarnation(sess, source, tp, stored, id, "target-side group "+k.group)
		case alEntry.usable() && b.Offset > srcOff:
			seek(sess, tp, b.Offset)
			log.Info("Started exactly-once from the at-least-once target-side progress", "topic", tp.topic, "partition", tp.partition, "offset", b.Offset)
		case srcOff >= 0 && srcEntry == entryOtherIncarnation:
			err = e.restartIncarnation(sess, source, tp, srcStored, id, "source group "+k.sourceGroup)
		case srcOff >= 0:
			log.Info("Started exactly-once from the source group's offset: the target holds no transaction of this partition yet",
				"topic", tp.topic, "partition", tp.partition, "offset", srcOff)
		default:
			if marks == nil {
				ctx, cancel := context.WithTimeout(sess.Context(), resumeLookupLimit)
				marks, err = k.topicMarks(ctx)
				cancel()
				if err != nil {
					err = fmt.Errorf("while reading the offsets of progress topic %q: %w", k.topic.name, err)
					break
				}
			}
			if starts == nil {
				starts = k.initialOffsets(source, claimKeys(sess.Claims()))
			}
			var resumed bool
			if resumed, err = k.startWithoutGroups(sess, source, tp, id, marks, starts, log); resumed {
				e.parts.get(tp.topic, tp.partition).resumed.Add(1)
			}
		}
		if err != nil {
			closeAll()
			return err
		}
	}
	for tp, w := range writers {
		x.put(sess, tp, w)
	}
	return nil
}

// fencedClaims is what fence found: the claims' producers, opened, and the offsets of
// the target-side and the source groups, or the error that stopped it (then it closed
// the producers it had opened).
type fencedClaims struct {
	writers  map[partitionKey]*txnWriter
	tgt, src *sarama.OffsetFetchResponse
	err      error
}

func (f fencedClaims) closeAll() {
	for _, w := range f.writers {
		w.close()
	}
}

// fence opens the producers of claims (in parallel), then reads the claims' offsets
// from the target-side and the source groups. Producers still opening when ctx ends
// give up (openTxnWriter).
func (x *exactlyOnce) fence(ctx context.Context, claims map[string][]int32) fencedClaims {
	e := x.e
	type opened struct {
		tp  partitionKey
		w   *txnWriter
		err error
	}
	results := make(chan opened)
	n := 0
	for topic, parts := range claims {
		for _, p := range parts {
			n++
			go func() {
				tp := partitionKey{topic, p}
				w, err := openTxnWriter(ctx, e, tp)
				results <- opened{tp, w, err}
			}()
		}
	}
	f := fencedClaims{writers: make(map[partitionKey]*txnWriter, n)}
	var errs []error
	for range n {
		r := <-results
		if r.err != nil {
			errs = append(errs, r.err)
			continue
		}
		f.writers[r.tp] = r.w
	}
	fail := func(err error) fencedClaims {
		f.closeAll()
		return fencedClaims{err: err}
	}
	if len(errs) > 0 {
		if refused := mergeRefusals(errs); refused != nil {
			// One missing ACL refused every partition's id: one error names it.
			return fail(fmt.Errorf("while fencing the previous owners of the claimed partitions: %w", refused))
		}
		return fail(fmt.Errorf("while fencing the previous owners of the claimed partitions: %w", errors.Join(errs...)))
	}
	k := e.keeper
	ask := map[string][]int32{}
	for topic, parts := range claims {
		ask[k.targetName(topic)] = append(ask[k.targetName(topic)], parts...)
	}
	var err error
	if f.tgt, err = listOffsets(k.targetAdmin, k.group, ask); err != nil {
		return fail(fmt.Errorf("while reading the offsets of target-side group %q: %w", k.group, err))
	}
	if f.src, err = listOffsets(k.sourceAdmin, k.sourceGroup, claims); err != nil {
		return fail(fmt.Errorf("while reading the offsets of source group %q: %w", k.sourceGroup, err))
	}
	return f
}

// seek makes the session's claim of tp start at offset, which may be before or after
// the source group's offset: sarama's MarkOffset only moves forward and ResetOffset
// only back.
func seek(sess sarama.ConsumerGroupSession, tp partitionKey, offset int64) {
	sess.MarkOffset(tp.topic, tp.partition, offset, "")
	sess.ResetOffset(tp.topic, tp.partition, offset, "")
}

// txnWriter is one source partition's transactional producer and what its results
// say about the open transaction.
type txnWriter struct {
	id       string
	client   sarama.Client
	producer sarama.AsyncProducer
	acksDone chan struct{}
	// open is exactlyOnce.open, which close counts down.
	open *atomic.Int64

	// syncs is on when the engine writes offset syncs: acks then record where each
	// source offset landed (landed).
	syncs bool

	mu sync.Mutex
	// sendErr is the first record of the open transaction that the target refused.
	sendErr error
	// acked and bytes count the open transaction's records the target acked.
	acked, bytes int64
	// landed holds, with syncs on, the open transaction's acked records in ack order.
	landed []landing
	// answered counts the open transaction's records with an ack or an error read;
	// ackedCh signals each one (without waiting).
	answered int64
	ackedCh  chan struct{}
}

// landing is where one source record landed on the target.
type landing struct{ source, target int64 }

// openTxnWriter opens the producer of tp's transactional id. Opening it is the fencing
// step: InitProducerId with the same id bumps the epoch, so the previous owner's
// producer can neither add to nor commit its transaction any more, and its open
// transaction is aborted.
//
// When ctx ends first (the session that asked for it ended), the producer's client is
// closed: sarama retries InitProducerId for about deliveryTimeout, each attempt waiting
// for its read timeout when the target does not answer, and an attempt answered late
// would fence the partition's next owner long after this process gave up on it.
func openTxnWriter(ctx context.Context, e *Engine, tp partitionKey) (*txnWriter, error) {
	id := txnID(e.cfg.ConsumerGroup, tp.topic, tp.partition)
	pc, err := kafka.ProducerConfig(e.cfg, e.kafkaOpts...)
	if err != nil {
		return nil, err
	}
	pc.Producer.Transaction.ID = id
	pc.Producer.Transaction.Timeout = txnTimeoutFor(e.cfg.DeliveryTimeout.Duration)
	pc.Producer.Transaction.Retry.Backoff = txnRetryBackoff
	pc.Producer.Transaction.Retry.Max = int(e.cfg.DeliveryTimeout.Duration/txnRetryBackoff) + 1
	if e.sender.limits.batchCap > 0 {
		pc.Producer.MaxMessageBytes = e.sender.limits.batchCap
	}
	// From the brokers the engine's target metadata lists now, as the batching
	// producers (brokerAddrs): a silent bootstrap server would cost each claim's
	// writer a read timeout.
	target := e.cfg.Target
	if t := e.sender.targets; t != nil {
		if seeds := brokerAddrs(t.probe); len(seeds) > 0 {
			target.BootstrapServers = seeds
		}
	}
	client, err := kafka.NewClientFromConfig(target, pc, append([]kafka.Option{kafka.WithRole(kafka.RoleTarget)}, e.kafkaOpts...)...)
	if err != nil {
		return nil, err
	}
	giveUp := context.AfterFunc(ctx, func() { _ = client.Close() })
	producer, err := sarama.NewAsyncProducerFromClient(client)
	if !giveUp() {
		// ctx ended: the client is closed, or being closed.
		if err == nil {
			_ = producer.Close()
		}
		return nil, fmt.Errorf("while opening the transactional producer %q on the target cluster: %w", id, ctx.Err())
	}
	if err != nil {
		_ = client.Close()
		if errors.Is(err, sarama.ErrTransactionalIDAuthorizationFailed) {
			err = &notAuthorizedError{role: kafka.RoleTarget, principal: kafka.Principal(e.cfg.Target), operation: "WRITE",
				resourceType: "TRANSACTIONAL_ID", resources: []string{id}, why: "delivery exactlyOnce",
				grant: fmt.Sprintf("grant Write on the transactional ids prefixed %q", e.cfg.ConsumerGroup+"/"), err: err}
		}
		return nil, fmt.Errorf("while opening the transactional producer %q on the target cluster: %w", id, err)
	}
	w := &txnWriter{id: id, client: client, producer: producer, acksDone: make(chan struct{}), syncs: e.syncs != nil,
		ackedCh: make(chan struct{}, 1), open: &e.txn.open}
	w.open.Add(1)
	go w.readAcks()
	return w, nil
}

func (w *txnWriter) readAcks() {
	defer close(w.acksDone)
	succ, errs := w.producer.Successes(), w.producer.Errors()
	for succ != nil || errs != nil {
		select {
		case m, ok := <-succ:
			if !ok {
				succ = nil
				continue
			}
			w.mu.Lock()
			w.acked++
			w.bytes += int64(encodedLen(m.Key) + encodedLen(m.Value))
			if source, ok := m.Metadata.(int64); ok && w.syncs {
				w.landed = append(w.landed, landing{source, m.Offset})
			}
			w.answered++
			w.mu.Unlock()
			w.signal()
		case pe, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			w.mu.Lock()
			if w.sendErr == nil {
				w.sendErr = fmt.Errorf("while writing to target topic %q partition %d: %w", pe.Msg.Topic, pe.Msg.Partition, pe.Err)
			}
			w.answered++
			w.mu.Unlock()
			w.signal()
		}
	}
}

// signal tells awaitAnswers that one more answer was read, without waiting.
func (w *txnWriter) signal() {
	select {
	case w.ackedCh <- struct{}{}:
	default:
	}
}

// ackWait bounds awaitAnswers: CommitTxn returned once the target acknowledged every
// record, so their answers are only being handed over.
const ackWait = 5 * time.Second

// awaitAnswers waits until the open transaction's sent records all have their ack or
// error read (CommitTxn can return before the last reaches readAcks), so that the
// transaction's counts and landings are whole; at most ackWait, or until abort.
func (w *txnWriter) awaitAnswers(sent int64, abort <-chan struct{}) {
	limit := time.NewTimer(ackWait)
	defer limit.Stop()
	for {
		w.mu.Lock()
		n := w.answered
		w.mu.Unlock()
		if n >= sent {
			return
		}
		select {
		case <-w.ackedCh:
		case <-abort:
			return
		case <-limit.C:
			return
		}
	}
}

// encodedLen is the length of a key or value, 0 for null.
func encodedLen(enc sarama.Encoder) int {
	if enc == nil {
		return 0
	}
	return enc.Length()
}

// finished returns what the transaction just ended did and resets the counts.
func (w *txnWriter) finished() (acked, bytes int64, landed []landing, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	acked, bytes, landed, err = w.acked, w.bytes, w.landed, w.sendErr
	w.acked, w.bytes, w.landed, w.sendErr, w.answered = 0, 0, nil, nil, 0
	return acked, bytes, landed, err
}

// close closes the producer without ending its open transaction: whoever opens the
// same transactional id next aborts it, or the target does after txnTimeout. A killed
// process leaves it the same way.
func (w *txnWriter) close() {
	_ = w.producer.Close()
	<-w.acksDone
	_ = w.client.Close()
	w.open.Add(-1)
}

// txnClaim is one claim mirrored in transactions.
type txnClaim struct {
	c  *claimState
	w  *txnWriter
	ss *sessionState
	// next is the source offset after the last record put in the open transaction.
	next int64
	// ticket holds the tracker's commit point (the source group's offset) at the open
	// transaction's first record until the transaction committed.
	ticket offsets.Ticket
	open   bool
	// count is the open transaction's source records; started when its first was read.
	count   int
	started time.Time
	// sent counts the open transaction's records handed to the producer.
	sent int64
}

// consumeClaimTxn is ConsumeClaim for delivery exactlyOnce.
func (s *stream) consumeClaimTxn(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	e := s.e
	// One ticket per open transaction: a small tracker is plenty.
	c, ss := s.startClaim(claim, 1<<10)
	defer c.part.detach()
	// The delivery watch looks at this claim as at any other: its tracker holds one
	// ticket per open transaction, from the transaction's first record until its
	// commit, so a transaction not committed within deliveryTimeout stops the engine.
	// sarama's own retries do not bound that: each produce retry to a target that
	// reads requests and never answers waits for the read timeout (30 s), and they
	// retry for deliveryTimeout. Once the session ends, the partition is being
	// released: its open transaction commits within the drain limit or is left to the
	// next owner, who aborts it. Nothing is owed for it then, and the watch lets it
	// go; a member resumed after a pause (a zombie), whose transactions cannot commit
	// any more, must learn that it was fenced, not fail on its own watch.
	stopUnwatch := context.AfterFunc(sess.Context(), func() { c.part.unwatch(c.tracker) })
	defer stopUnwatch()

	w := e.txn.take(sess, partitionKey{claim.Topic(), claim.Partition()})
	if w == nil {
		// Setup fences every claim before any starts; a claim without a producer is a
		// bug, and writing without fencing would not be exactly once.
		e.fail(fmt.Errorf("no transactional producer was opened for source partition %s/%d", claim.Topic(), claim.Partition()))
		return nil
	}
	t := &txnClaim{c: c, w: w, ss: ss}
	err := t.run(sess.Context(), claim)
	if t.open {
		// Never committed: the source group's offset stays at its first record. Its
		// records are owed to no one (the next owner's fencing, or the target's
		// timeout, aborts the transaction), so the delivery watch lets the released
		// partition go.
		e.txn.leftOpen.Add(1)
		c.part.unwatch(c.tracker)
	}
	if e.aborted.Load() || t.open {
		// As a killed process: the open transaction is left to the fencing of the next
		// owner (or the target's transaction timeout).
		go w.close()
	} else {
		w.close()
	}
	if e.aborted.Load() {
		return nil
	}
	if err != nil && !errors.Is(err, errStopped) && !errors.Is(err, context.Canceled) {
		t.failed(sess.Context(), s.log, err)
	}
	e.commitSession(ss.final, ss)
	if e.syncs != nil && !t.open {
		// Every transaction of the claim committed (its syncs written) or aborted: no
		// copy of it follows. One left open may still commit, unsynced: no end then.
		e.syncs.assignmentEnded(c.part, c.tracker, 0)
	}
	return nil
}

// failed handles a transaction that failed. Fenced (another owner opened the id: this
// process was a zombie), aborted by the target, failed while its session was ending, or
// left open at the drain limit, the claim just ends: the transaction is (or will be) aborted, and the session ends with
// this claim; the next one fences the id and resumes from the target's offset. Anything
// else stops the engine like a send that finally failed (sarama retried for
// deliveryTimeout); the restart fences the id and resumes from the target's offset.
func (t *txnClaim) failed(session context.Context, log logr.Logger, err error) {
	e := t.c.e
	e.txn.failed.Add(1)
	kv := []any{"topic", t.c.topic, "partition", t.c.part.partition, "transactionalId", t.w.id}
	switch {
	case e.isFailed():
	case errors.Is(err, errDrainLimit):
		log.Info("Left a transaction open at the drain limit; the partition's next owner aborts it", append(kv, "drainLimit", e.life.drainLimit)...)
	case fenced(err):
		e.txn.fenced.Add(1)
		log.Info("Was fenced by a newer owner of the partition; its open transaction is aborted", append(kv, "reason", err.Error())...)
	case session.Err() != nil:
		// The partition was being released (a rebalance, or this process was evicted
		// while paused): its next owner fences the id and resumes from the target.
		log.Info("Failed a transaction of a released partition; its next owner resumes from the target's offset", append(kv, "reason", err.Error())...)
	case errors.Is(err, sarama.ErrInvalidTxnState):
		// The target aborted the transaction itself (its timeout passed while the
		// target was unreachable). The next session fences the id and resumes from
		// the target's offset.
		log.Info("The target aborted the transaction; the partition restarts from the offset of its last committed transaction",
			append(kv, "reason", err.Error())...)
	default:
		e.fail(err)
	}
}

// run mirrors the claim in transactions until the session ends (then the open
// transaction is committed within the drain limit) or the engine fails or is aborted
// (then it is left open). It returns the error of a transaction that failed.
//
// Commits start at most once per transactionInterval, on a cadence kept from the last
// one: a transaction is committed transactionInterval after the previous commit began,
// or at once when that is past (its first record came after a quiet spell, or the
// previous commit took longer than the interval). Timing it from its own first record
// instead made a record read while the previous commit ran wait for that commit, a
// whole interval and its own commit: the end-to-end p99 of the exactly-once bench was
// about the interval plus two commits. Before a commit the transaction takes every
// record already waiting (sendReady), so that a commit slower than the interval (a
// target 100 ms away) still commits the records that came meanwhile together, not one
// per transaction.
func (t *txnClaim) run(ctx context.Context, claim sarama.ConsumerGroupClaim) error {
	e := t.c.e
	msgs := claim.Messages()
	interval := e.cfg.TransactionInterval.Duration
	timer := time.NewTimer(interval)
	timer.Stop()
	defer timer.Stop()
	// lastCommit is when the last commit began; zero before the first.
	var lastCommit time.Time
	for {
		var m *sarama.ConsumerMessage
		select {
		case msg, more := <-msgs:
			if !more {
				// The partition consumer stopped: commit and end the claim.
				return t.commit()
			}
			m = msg
		case <-timer.C:
		case <-ctx.Done():
		case <-e.failed:
			return errStopped
		}
		if ctx.Err() != nil {
			// The drain: commit what the open transaction holds; m, if any, is read
			// again by the next owner.
			return t.commit()
		}
		if m != nil {
			if !t.open {
				if err := t.begin(); err != nil {
					return err
				}
				timer.Reset(max(0, interval-t.started.Sub(lastCommit)))
			}
			if err := t.send(ctx, m); err != nil {
				if errors.Is(err, context.Canceled) && !e.isFailed() {
					return t.commit()
				}
				return err
			}
			if t.count < e.cfg.MaxInFlightPerPartition {
				continue
			}
		}
		if t.open {
			if closed, err := t.sendReady(ctx, msgs); err != nil || closed {
				if err == nil || (errors.Is(err, context.Canceled) && !e.isFailed()) {
					return t.commit()
				}
				return err
			}
			lastCommit = time.Now()
			if err := t.commit(); err != nil {
				return err
			}
		}
	}
}

// sendReady puts the records already waiting in msgs into the open transaction, up to
// maxInFlightPerPartition, without waiting for more. closed reports that msgs was closed
// (the partition consumer stopped).
func (t *txnClaim) sendReady(ctx context.Context, msgs <-chan *sarama.ConsumerMessage) (closed bool, err error) {
	for t.count < t.c.e.cfg.MaxInFlightPerPartition && ctx.Err() == nil {
		select {
		case m, more := <-msgs:
			if !more {
				return true, nil
			}
			if err := t.send(ctx, m); err != nil {
				return false, err
			}
		default:
			return false, nil
		}
	}
	return false, nil
}

// send puts one source record's outputs into the open transaction. A record the
// provenance drops, the handler filters or skips puts none, and its offset moves with
// the transaction all the same.
func (t *txnClaim) send(ctx context.Context, m *sarama.ConsumerMessage) error {
	c := t.c
	var msgs []*sarama.ProducerMessage
	// The provenance is judged on the record as read, before the handler chain, and
	// stamped on every record the chain leaves (as mirrorRecord does).
	pv := c.e.provenance
	var stamp []byte
	drop := dropNone
	if pv != nil {
		stamp, drop = pv.check(m.Headers)
	}
	switch {
	case drop != dropNone:
		c.part.dropped(drop)
	case c.e.passThrough:
		if err := t.awaitTarget(ctx, c.target, m.Partition); err != nil {
			return err
		}
		pm := &sarama.ProducerMessage{Topic: c.target, Partition: m.Partition, Timestamp: m.Timestamp}
		setKV(pm, m.Key, m.Value)
		for _, h := range m.Headers {
			if pv == nil || !pv.isHeader(h.Key) {
				pm.Headers = append(pm.Headers, *h)
			}
		}
		if stamp != nil {
			pm.Headers = append(pm.Headers, pv.stampHeader(stamp))
		}
		msgs = append(msgs, pm)
	default:
		hs := make([]handler.Header, 0, len(m.Headers))
		for _, h := range m.Headers {
			hs = append(hs, handler.Header{Key: string(h.Key), Value: h.Value})
		}
		r := &handler.Record{Topic: m.Topic, Partition: m.Partition, Offset: m.Offset, Timestamp: m.Timestamp,
			Key: m.Key, Value: m.Value, Headers: hs}
		outs, err := c.e.chain.Handle(ctx, r, nil)
		switch {
		case err != nil && handlerSkipped(err):
			c.part.skipped.Add(1)
		case err != nil:
			return fmt.Errorf("while handling source record %s/%d offset %d: %w", m.Topic, m.Partition, m.Offset, err)
		case len(outs) == 0:
			c.part.filtered.Add(1)
		}
		for _, out := range outs {
			topic := c.targetName(out.Topic)
			if err := t.awaitTarget(ctx, topic, out.Partition); err != nil {
				return err
			}
			pm := &sarama.ProducerMessage{Topic: topic, Partition: out.Partition, Timestamp: out.Timestamp}
			setKV(pm, out.Key, out.Value)
			for _, h := range out.Headers {
				if pv == nil || h.Key != pv.name {
					pm.Headers = append(pm.Headers, sarama.RecordHeader{Key: []byte(h.Key), Value: h.Value})
				}
			}
			if stamp != nil {
				pm.Headers = append(pm.Headers, pv.stampHeader(stamp))
			}
			msgs = append(msgs, pm)
		}
	}
	for _, pm := range msgs {
		if t.w.syncs {
			// The ack names the source offset (landed). Groups, which turns syncs on,
			// refuses handlers that move a record to another partition.
			pm.Metadata = m.Offset
		}
		select {
		case t.w.producer.Input() <- pm:
			t.sent++
		case <-c.e.failed:
			return errStopped
		case <-t.ss.drain.Done():
			return fmt.Errorf("while handing source record %s/%d offset %d to the producer: %w", m.Topic, m.Partition, m.Offset, errDrainLimit)
		}
	}
	if t.count == 0 {
		t.ticket = c.tracker.Add(m.Offset, 1)
	} else {
		c.tracker.Add(m.Offset, 0)
	}
	t.count++
	t.next = m.Offset + 1
	return nil
}

// awaitTarget is claimState.awaitTarget for a record of the open transaction. When
// the target topic is not known to be ready, the record may wait long (the topic is
// missing or has too few partitions): the records the transaction already holds are
// committed first and a new transaction begins, so that no transaction stays open
// while its partition waits. An open one would hold back read_committed readers, be
// aborted by the target after its transaction timeout, and stop the engine on the
// delivery watch after deliveryTimeout.
func (t *txnClaim) awaitTarget(ctx context.Context, topic string, partition int32) error {
	c := t.c
	if c.knownReady(topic, partition) {
		return nil
	}
	if t.count > 0 {
		if err := t.commit(); err != nil {
			return err
		}
		if err := t.begin(); err != nil {
			return err
		}
	}
	return c.awaitTarget(ctx, topic, partition)
}

// begin opens a transaction.
func (t *txnClaim) begin() error {
	if err := t.w.producer.BeginTxn(); err != nil {
		return fmt.Errorf("while beginning a transaction: %w", err)
	}
	t.open, t.count, t.sent, t.started = true, 0, 0, time.Now()
	return nil
}

// errDrainLimit ends a claim whose transaction was not committed within the drain
// limit after its session ended.
var errDrainLimit = errors.New("the drain limit passed")

// fenced reports whether err says a newer producer opened the same transactional id.
func fenced(err error) bool {
	return errors.Is(err, sarama.ErrProducerFenced) || errors.Is(err, sarama.ErrInvalidProducerEpoch)
}

// setKV sets a producer message's key and value, keeping null apart from empty.
func setKV(pm *sarama.ProducerMessage, key, value []byte) {
	if key != nil {
		pm.Key = sarama.ByteEncoder(key)
	}
	if value != nil {
		pm.Value = sarama.ByteEncoder(value)
	}
}

// commit adds the next source offset to the open transaction and commits it. A commit
// still running when the session's drain limit passes, or when the engine is aborted,
// is left to finish or fail on its own: the transaction is then settled by whoever
// opens the id next.
func (t *txnClaim) commit() error {
	c := t.c
	e := c.e
	if e.aborted.Load() {
		return errStopped
	}
	if !t.open {
		return nil
	}
	// A transaction that holds no source record (a stop or a rebalance while its first
	// record waited for the target topic) stores no offset: t.next is only what an
	// earlier transaction reached, or its zero value, which would send the partition's
	// next owner back to offset 0. sarama then ends it without a request.
	if t.count > 0 {
		meta := withTopicID(txnProgressMetadata(c.topic, c.part.partition), c.topicID)
		offs := map[string][]*sarama.PartitionOffsetMetadata{
			c.target: {{Partition: c.part.partition, Offset: t.next, LeaderEpoch: -1, Metadata: &meta}},
		}
		if err := t.w.producer.AddOffsetsToTxn(offs, e.keeper.group); err != nil && !errors.Is(err, sarama.ErrTransactionNotReady) {
			return fmt.Errorf("while adding source offset %d of %s/%d to the transaction: %w", t.next, c.topic, c.part.partition, err)
		}
	}
	// Not ready means a record failed and moved the transaction to an error state;
	// CommitTxn then commits nothing and returns that record's error (fenced, ...).
	done := make(chan error, 1)
	go func() { done <- t.w.producer.CommitTxn() }()
	var err error
	select {
	case err = <-done:
	case <-e.abortCh:
		return errStopped
	case <-t.ss.drain.Done():
		return fmt.Errorf("while committing the transaction of %s/%d: %w", c.topic, c.part.partition, errDrainLimit)
	}
	if err == nil {
		t.w.awaitAnswers(t.sent, e.abortCh)
	}
	acked, bytes, landed, sendErr := t.w.finished()
	if err == nil {
		err = sendErr
	}
	if err != nil {
		return fmt.Errorf("while committing the transaction of %s/%d up to offset %d: %w", c.topic, c.part.partition, t.next, err)
	}
	t.open = false
	if t.count == 0 {
		return nil
	}
	// The progress topic's copy of the offset, for when the target-side group expired.
	e.keeper.recordTransaction(partitionKey{c.topic, c.part.partition}, position{next: t.next, topicID: c.topicID})
	if s := e.syncs; s != nil {
		for _, l := range landed {
			s.observe(c.part, c.tracker, l.source, l.target)
		}
	}
	c.tracker.Ack(t.ticket)
	c.part.records.Add(acked)
	c.part.bytes.Add(bytes)
	c.part.latency.observe(time.Since(t.started))
	e.txn.committed.Add(1)
	return nil
}

// warmTxnGroupCoordinator asks the target for the coordinator of group (the group whose
// offsets the transactions commit) as the engine starts, before the first transactional
// producer opens. On a target where no consumer group was ever used (a new
// disaster-recovery cluster), __consumer_offsets does not exist, and Kafka creates it at
// the first FindCoordinator of a group. The first FindCoordinator of a transactional id
// is answered COORDINATOR_NOT_AVAILABLE while Kafka creates __transaction_state, and
// sarama then looks up the leader of __consumer_offsets: with nothing having created
// it, the producer's metadata retries held that look-up, and so the first records, for
// deliveryTimeout (TestExactlyOnceFirstStartOnFreshTarget). Asked here, the topic is
// being created by then. Errors are left to the transactions' own look-ups.
func warmTxnGroupCoordinator(target sarama.Client, group string) {
	if b, err := target.Coordinator(group); err == nil {
		_ = b.Open(target.Config())
	}
}
