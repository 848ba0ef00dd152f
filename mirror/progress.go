package mirror

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/IBM/sarama"
	"github.com/go-logr/logr"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// progressGroupSuffix names the target-side group after the source group it backs up:
// its offsets are source offsets, which the suffix says, and the distinct name keeps it
// apart from any group that really consumes the target (an active-active mirror's own
// source group on this cluster, an application), whose offsets it would otherwise mix
// with, or whose live members would refuse its commits.
const progressGroupSuffix = ".source-offsets"

// resumeLookupLimit bounds the offset look-ups of a session's Setup (source group and
// target-side group), which run before any claim of the session starts.
const resumeLookupLimit = 30 * time.Second

// progressFlushLimit bounds the last write of the target-side progress when the engine
// stops, so that a target that stopped answering does not hold the process.
const progressFlushLimit = 10 * time.Second

// ProgressGroup returns the name of the consumer group on the target cluster in which
// the engine keeps its progress for the source group consumerGroup.
func ProgressGroup(consumerGroup string) string { return consumerGroup + progressGroupSuffix }

// progressMetadata is the commit metadata of a target-side entry. It names the source
// partition whose offset the entry holds, so that an entry is used only for the
// partition that wrote it; the entry written appends the topic ID (withTopicID), so
// that it is used only for the incarnation of the topic that wrote it.
func progressMetadata(topic string, partition int32) string {
	return fmt.Sprintf("kafka-mirror source offset of %s/%d", topic, partition)
}

// progressKeeper keeps the engine's progress on the target cluster too, so that a
// source group whose offsets are gone does not make the engine start over. Kafka drops
// a group's offsets once the group has been empty for offsets.retention.minutes (7
// days by default): a mirror paused or crash-looping for longer would otherwise start
// again from the oldest offset (a full re-mirror, every record twice) or, with a short
// retention, skip what was deleted meanwhile without a word.
//
// The progress lives in a consumer group on the target cluster, ProgressGroup(source
// group), written with plain OffsetCommit requests (generation -1, no members), rather
// than in a compacted topic: a group needs no topic to create, size, compact and read
// back from its start, Kafka keeps, replicates and expires it like any group, the
// admin API reads it in one request, and `kafka-consumer-groups --describe` shows it.
// The price: Kafka accepts a commit only for a partition that exists on the target and
// that the principal may read, so an entry is keyed by the claim's target topic (the
// renamed source topic, one-to-one with it) and the SOURCE partition number, and its
// metadata names the source partition (progressMetadata). That key exists whenever
// partitions are preserved, which the engine enforces, and with hash or round-robin
// partitioning when the topic sync keeps partition counts equal; a partition the
// target lacks is logged once and has no target-side progress. The entries' offsets
// are source offsets, so this group's "lag" in tools means nothing.
//
// The group has no members, so Kafka expires it like the source group: with the same
// offsets.retention.minutes on both clusters, after the same pause. The keeper
// therefore also writes every partition's commit point to the compacted progress
// topic (progresstopic.go), which is read for a partition neither group has an
// offset of its incarnation for.
//
// Invariants:
//   - An entry is an offset below which every record was acked by the target (or
//     dropped on purpose): it is written after the source commit of the same commit
//     point, never ahead of what the target holds.
//   - A source group offset that exists always wins, lower or higher: the target-side
//     entry is read only for a partition the source group has no offset for.
type progressKeeper struct {
	e           *Engine
	group       string
	sourceGroup string
	initial     config.InitialOffset
	targetName  func(sourceTopic string) string
	sourceAdmin sarama.ClusterAdmin
	targetAdmin sarama.ClusterAdmin
	// target is the target admin's client: it finds the group's coordinator and sends
	// the commits.
	target sarama.Client
	log    logr.Logger

	// topic is the progress topic (progresstopic.go), the copy no retention expires.
	topic *progressTopic
	// firstResume is set by the first resume, which reads topic early (see resume).
	firstResume atomic.Bool
	// setUp is closed once the first session's Setup looked its offsets up (setupDone):
	// run opens (creates) topic only then.
	setUp     chan struct{}
	setUpOnce sync.Once

	mu      sync.Mutex
	pending map[partitionKey]position // source partition -> next offset, not yet written
	// latest is every partition's last commit point, for the progress topic.
	latest       map[partitionKey]position
	missing      map[partitionKey]bool // partitions the target has no key for, logged once
	failing      bool                  // the last write failed; logged once until it works again
	topicFailing bool                  // the last write of the progress topic failed, likewise
	wake         chan struct{}
}

func newProgressKeeper(e *Engine, sourceAdmin, targetAdmin sarama.ClusterAdmin, target sarama.Client) *progressKeeper {
	return &progressKeeper{
		e:           e,
		group:       ProgressGroup(e.cfg.ConsumerGroup),
		sourceGroup: e.cfg.ConsumerGroup,
		initial:     e.cfg.InitialOffset,
		targetName:  e.sel.TargetName,
		sourceAdmin: sourceAdmin,
		targetAdmin: targetAdmin,
		target:      target,
		log:         e.log.WithValues("progressGroup", ProgressGroup(e.cfg.ConsumerGroup)),
		topic:       newProgressTopic(e, targetAdmin, target),
		pending:     map[partitionKey]position{},
		latest:      map[partitionKey]position{},
		missing:     map[partitionKey]bool{},
		wake:        make(chan struct{}, 1),
		setUp:       make(chan struct{}),
	}
}

// setupDone tells run that the first session's Setup is past its offset look-ups.
func (k *progressKeeper) setupDone() {
	if k != nil {
		k.setUpOnce.Do(func() { close(k.setUp) })
	}
}

// position is a committed offset and the topic incarnation it belongs to.
type position struct {
	next    int64
	topicID string
}

// newer reports whether p replaces cur in a queue: a later offset, or any offset of
// another incarnation (the topic was re-created: its offsets started again).
func (p position) newer(cur position) bool { return p.next > cur.next || p.topicID != cur.topicID }

// record queues the offsets just committed to the source group for the target-side
// group and the progress topic.
func (k *progressKeeper) record(marks map[partitionKey]position) {
	if len(marks) == 0 {
		return
	}
	k.mu.Lock()
	for tp, p := range marks {
		if cur, ok := k.pending[tp]; !ok || p.newer(cur) {
			k.pending[tp] = p
		}
		k.latest[tp] = p
	}
	k.mu.Unlock()
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

// recordTransaction notes an offset just committed in a transaction, which wrote the
// target-side group itself, for the progress topic.
func (k *progressKeeper) recordTransaction(tp partitionKey, p position) {
	k.mu.Lock()
	k.latest[tp] = p
	k.mu.Unlock()
}

// run writes queued progress until stop is closed, then writes what is left (the
// streams' last commits) once and returns; after abort it returns without writing, as
// a killed process would. A failed write is kept and retried with the next commit; it
// never stops the mirror, whose source group still holds the progress.
//
// It opens the progress topic first, once the first session's Setup has read it (or at
// a stop): at a mirror's first start the topic does not exist yet, and that read then
// ends with one metadata request, where a topic being created meanwhile would make it
// wait for the new topic's leader. Then it writes the moved commit points to it every
// progressTopicInterval and once more after the last group write.
func (k *progressKeeper) run(stop, abort <-chan struct{}) {
	defer k.topic.close()
	select {
	case <-k.setUp:
	case <-stop:
	case <-abort:
		return
	}
	k.writeTopic()
	tick := time.NewTicker(progressTopicInterval)
	defer tick.Stop()
	for {
		select {
		case <-abort:
			return
		case <-k.wake:
			k.flushAndLog()
		case <-tick.C:
			k.writeTopic()
		case <-stop:
			select {
			case <-abort:
			default:
				k.flushAndLog()
				k.writeTopic()
			}
			return
		}
	}
}

// writeTopic writes every partition's last commit point that moved to the progress
// topic (opening it first if needed). A failure is logged once until a write works
// again; the points are written with the next one.
func (k *progressKeeper) writeTopic() {
	k.mu.Lock()
	latest := maps.Clone(k.latest)
	k.mu.Unlock()
	err := k.topic.write(latest)
	k.mu.Lock()
	wasFailing := k.topicFailing
	k.topicFailing = err != nil
	k.mu.Unlock()
	switch {
	case err != nil && !wasFailing:
		k.log.Error(err, "Failed to write the progress topic; retrying (the groups still hold the progress, but they expire after offsets.retention.minutes without the mirror running). "+
			"With ACLs, grant the target principal Create, DescribeConfigs, Read and Write on the topic",
			"progressTopic", k.topic.name)
	case err == nil && wasFailing:
		k.log.Info("Wrote the progress topic again", "progressTopic", k.topic.name)
	}
}

func (k *progressKeeper) flushAndLog() {
	err := k.flush()
	k.mu.Lock()
	wasFailing := k.failing
	k.failing = err != nil
	k.mu.Unlock()
	switch {
	case err != nil && !wasFailing:
		k.log.Error(err, "Failed to write the progress to the target cluster; retrying with the next commit (the source group still holds it)")
	case err == nil && wasFailing:
		k.log.Info("Wrote the progress to the target cluster again")
	}
}

// flush writes every queued offset in one OffsetCommit request and checks the answer
// per partition. Offsets not confirmed are queued again unless a newer one came.
func (k *progressKeeper) flush() error {
	k.mu.Lock()
	batch := k.pending
	k.pending = make(map[partitionKey]position, len(batch))
	k.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	req := sarama.NewOffsetCommitRequest(k.target.Config(), k.group)
	for tp, p := range batch {
		req.AddBlockWithLeaderEpoch(k.targetName(tp.topic), tp.partition, p.next, -1, 0, withTopicID(progressMetadata(tp.topic, tp.partition), p.topicID))
	}
	coordinator, err := k.target.Coordinator(k.group)
	if err != nil {
		k.requeue(batch)
		return fmt.Errorf("while finding the coordinator of group %q on the target cluster: %w", k.group, err)
	}
	resp, err := coordinator.CommitOffset(req)
	if err != nil {
		k.requeue(batch)
		_ = k.target.RefreshCoordinator(k.group)
		return fmt.Errorf("while committing to group %q on the target cluster: %w", k.group, err)
	}
	var errs []error
	refresh := false
	for tp, p := range batch {
		target := k.targetName(tp.topic)
		kerr := sarama.ErrIncompleteResponse
		if ps, ok := resp.Errors[target]; ok {
			if e, ok := ps[tp.partition]; ok {
				kerr = e
			}
		}
		switch {
		case errors.Is(kerr, sarama.ErrNoError):
		case errors.Is(kerr, sarama.ErrUnknownTopicOrPartition):
			// The target has no such partition to key the entry by: say so once.
			k.mu.Lock()
			first := !k.missing[tp]
			k.missing[tp] = true
			k.mu.Unlock()
			if first {
				k.log.Info("Kept no target-side progress for a source partition: the target topic has no partition with its number",
					"topic", tp.topic, "partition", tp.partition, "targetTopic", target)
			}
		default:
			if errors.Is(kerr, sarama.ErrNotCoordinatorForConsumer) || errors.Is(kerr, sarama.ErrConsumerCoordinatorNotAvailable) ||
				errors.Is(kerr, sarama.ErrOffsetsLoadInProgress) {
				refresh = true
			}
			k.requeue(map[partitionKey]position{tp: p})
			errs = append(errs, fmt.Errorf("%s/%d: %w", target, tp.partition, kerr))
		}
	}
	if refresh {
		_ = k.target.RefreshCoordinator(k.group)
	}
	if len(errs) > 0 {
		return fmt.Errorf("while committing to group %q on the target cluster: %w", k.group, errors.Join(errs...))
	}
	return nil
}

func (k *progressKeeper) requeue(batch map[partitionKey]position) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for tp, p := range batch {
		if cur, ok := k.pending[tp]; !ok || p.next > cur.next && p.topicID == cur.topicID {
			k.pending[tp] = p
		}
	}
}

// warm readies the target-side look-ups of the first session's Setup (resume) while the
// engine starts, so that they do not wait for round trips after the group join: it
// finds the target-side group's coordinator and connects to it (the client keeps both),
// and reads the progress topic to its end (progressTopic.read keeps what it read and
// later reads only what was written since). Nothing is decided from what it reads:
// Setup looks both up again, now one round trip each. Errors are left to Setup's own
// look-ups.
func (k *progressKeeper) warm(ctx context.Context) {
	if k == nil {
		return
	}
	var wg sync.WaitGroup
	wg.Go(func() {
		if b, err := k.target.Coordinator(k.group); err == nil {
			_ = b.Open(k.target.Config())
		}
	})
	wg.Go(func() { _, _ = k.topic.read(ctx) })
	wg.Wait()
}

// resume runs in a session's Setup, before any claim starts consuming: for each
// claimed partition the source group has no offset for, it moves the session's offset
// to the target-side progress when there is one (sarama then starts the claim there
// and the next commit writes it back to the source group), else to its record in the
// progress topic (startWithoutGroups), and otherwise logs that the partition starts at
// initialOffset. It returns the partitions resumed from the target.
// A partition with a source group offset is left alone: that offset always wins, unless
// it names another incarnation of the topic (incarnation.go). A position of another
// incarnation, in either group, is never used: the partition starts at the beginning
// of the topic as it is now.
//
// When either group cannot be read for a passing reason (coordinator moving or
// unreachable, no answer within resumeLookupLimit), resume returns an error rather
// than guess (a guess would re-mirror from the oldest offset, or skip records with
// latest): the session ends and the stream joins again after its backoff. When the
// principal may not read the target-side group, waiting cannot help: resume logs how
// to grant it and goes on as if there were no target-side progress. The look-ups end
// with the session.
func (k *progressKeeper) resume(sess sarama.ConsumerGroupSession, source sarama.Client, ids map[string]string, log logr.Logger) ([]partitionKey, error) {
	if k == nil {
		return nil, nil
	}
	type found struct {
		none   []partitionKey
		stale  map[partitionKey]string
		tgt    *sarama.OffsetFetchResponse
		marks  map[partitionKey]position
		starts map[partitionKey]int64
		err    error
	}
	ctx, cancel := context.WithTimeout(sess.Context(), resumeLookupLimit)
	defer cancel()
	done := make(chan found, 1)
	go func() {
		// The first Setup of the process reads the progress topic beside the group
		// look-ups rather than after them, should they find no offset: at a mirror's
		// first start that is one round trip less before the first record. Later
		// sessions read it only when needed.
		// It reads the initialOffset of every claimed partition beside them too: at a
		// first start no group has an offset, and a read per partition after the
		// look-ups was one round trip each, one after the other.
		var early, earlyStarts chan found
		if k.firstResume.CompareAndSwap(false, true) {
			early, earlyStarts = make(chan found, 1), make(chan found, 1)
			go func() {
				marks, err := k.topic.read(ctx)
				early <- found{marks: marks, err: err}
			}()
			go func() { earlyStarts <- found{starts: k.initialOffsets(source, claimKeys(sess.Claims()))} }()
		}
		none, stale, tgt, err := k.lookup(sess.Claims(), ids)
		var marks map[partitionKey]position
		var starts map[partitionKey]int64
		if early != nil {
			r := <-early
			if err == nil && k.needsTopic(none, tgt) {
				marks, err = k.topicMarksFrom(r.marks, r.err)
			}
			starts = (<-earlyStarts).starts
		} else if err == nil && k.needsTopic(none, tgt) {
			marks, err = k.topicMarks(ctx)
			if err == nil {
				starts = k.initialOffsets(source, none)
			}
		}
		done <- found{none, stale, tgt, marks, starts, err}
	}()
	var f found
	select {
	case f = <-done:
	case <-sess.Context().Done():
		return nil, sess.Context().Err()
	case <-ctx.Done():
		f.err = fmt.Errorf("no answer within %v", resumeLookupLimit)
	}
	if err := sess.Context().Err(); err != nil {
		// The session ended (a rebalance) while the look-ups ran: not a failure of
		// theirs, whichever of the two contexts select saw first.
		return nil, err
	}
	if f.err != nil {
		return nil, fmt.Errorf("while reading the offsets of source group %q, target-side group %q and progress topic %q: %w",
			k.sourceGroup, k.group, k.topic.name, f.err)
	}
	for tp, old := range f.stale {
		if err := k.e.restartIncarnation(sess, source, tp, old, ids[tp.topic], "source group "+k.sourceGroup); err != nil {
			return nil, err
		}
	}
	var resumed []partitionKey
	for _, tp := range f.none {
		b := blockOf(f.tgt, k.targetName(tp.topic), tp.partition)
		if b != nil && errors.Is(b.Err, sarama.ErrNoError) && b.Offset >= 0 {
			switch verdict, stored := judgeEntry(b.Metadata, progressMetadata(tp.topic, tp.partition), ids[tp.topic]); {
			case verdict.usable():
				sess.MarkOffset(tp.topic, tp.partition, b.Offset, "")
				resumed = append(resumed, tp)
				log.Info("Resumed from the target-side progress: the source group has no offset for this partition (expired or deleted)",
					"topic", tp.topic, "partition", tp.partition, "offset", b.Offset, "group", k.sourceGroup, "progressGroup", k.group)
				continue
			case verdict == entryOtherIncarnation:
				if err := k.e.restartIncarnation(sess, source, tp, stored, ids[tp.topic], "target-side group "+k.group); err != nil {
					return nil, err
				}
				continue
			}
		}
		ok, err := k.startWithoutGroups(sess, source, tp, ids[tp.topic], f.marks, f.starts, log)
		if err != nil {
			return nil, err
		}
		if ok {
			resumed = append(resumed, tp)
		}
	}
	return resumed, nil
}

// needsTopic reports whether a partition the source group has no offset for has no
// entry in the target-side group either (tgt, nil when it was not read): only then is
// the progress topic read.
func (k *progressKeeper) needsTopic(none []partitionKey, tgt *sarama.OffsetFetchResponse) bool {
	for _, tp := range none {
		b := blockOf(tgt, k.targetName(tp.topic), tp.partition)
		if b == nil || !errors.Is(b.Err, sarama.ErrNoError) || b.Offset < 0 {
			return true
		}
		if verdict, _ := judgeEntry(b.Metadata, progressMetadata(tp.topic, tp.partition), ""); verdict == entryForeign {
			return true
		}
	}
	return false
}

// topicMarks reads the progress topic (progressTopic.read) within ctx. When the
// principal may not read it, waiting cannot help: it logs how to grant it and returns
// no records, so the partitions start at initialOffset.
func (k *progressKeeper) topicMarks(ctx context.Context) (map[partitionKey]position, error) {
	return k.topicMarksFrom(k.topic.read(ctx))
}

// topicMarksFrom is topicMarks of a read already made.
func (k *progressKeeper) topicMarksFrom(marks map[partitionKey]position, err error) (map[partitionKey]position, error) {
	if errors.Is(err, sarama.ErrTopicAuthorizationFailed) {
		k.log.Error(err, "Cannot read the progress topic: grant the mirror's target principal Read on it; partitions no group has an offset for start at initialOffset",
			"progressTopic", k.topic.name, "initialOffset", k.initial)
		return map[partitionKey]position{}, nil
	}
	return marks, err
}

// startWithoutGroups starts a claimed partition that no group has a position of its
// incarnation for, by its record in the progress topic (marks): there when the record
// is of the topic's current incarnation (or either ID is unknown), at the beginning of
// the topic as it is now when the record is of another (restartIncarnation), and at
// initialOffset, logged, when there is none. It reports whether the partition resumed
// from the record.
func (k *progressKeeper) startWithoutGroups(sess sarama.ConsumerGroupSession, source sarama.Client, tp partitionKey, currentID string,
	marks map[partitionKey]position, starts map[partitionKey]int64, log logr.Logger) (bool, error) {
	p, ok := marks[tp]
	switch {
	case !ok && k.e.startAtInitialPosition(sess, tp, currentID, log):
		return false, nil
	case !ok:
		start, err := k.startAtInitialOffset(sess, source, tp, starts)
		if err != nil {
			return false, err
		}
		log.Info("Started partition at initialOffset: neither the groups nor the progress topic have an offset for it",
			"topic", tp.topic, "partition", tp.partition, "initialOffset", k.initial, "startOffset", start, "group", k.sourceGroup,
			"progressGroup", k.group, "progressTopic", k.topic.name)
		return false, nil
	case currentID != "" && p.topicID != "" && p.topicID != currentID:
		return false, k.e.restartIncarnation(sess, source, tp, p.topicID, currentID, "progress topic "+k.topic.name)
	}
	seek(sess, tp, p.next)
	log.Info("Resumed from the progress topic: no group has an offset for this partition any more (expired or deleted)",
		"topic", tp.topic, "partition", tp.partition, "offset", p.next, "topicId", p.topicID,
		"group", k.sourceGroup, "progressGroup", k.group, "progressTopic", k.topic.name)
	return true, nil
}

// startAtInitialOffset makes the claim of tp start at the offset initialOffset names
// now (the partition's log start for oldest, its end for latest), resolved here rather
// than by the consumer, and returns it. The claim's start offset is then known from the
// assignment on, so the partition's committed offset and lag are reported before its
// first commit: an empty partition, or one whose older records latest leaves out, never
// gets a record to commit, and "lag 0 for every partition" (docs/failover.md) could not
// be checked for it. The consumer starts exactly there, as it would have by itself.
// The offset is taken from starts (initialOffsets, read in this Setup) when it is there,
// else asked now.
func (k *progressKeeper) startAtInitialOffset(sess sarama.ConsumerGroupSession, source sarama.Client, tp partitionKey, starts map[partitionKey]int64) (int64, error) {
	start, ok := starts[tp]
	if !ok {
		var err error
		if start, err = source.GetOffset(tp.topic, tp.partition, k.initialTimestamp()); err != nil {
			return -1, fmt.Errorf("while reading the %s offset of source partition %s/%d (initialOffset): %w", k.initial, tp.topic, tp.partition, err)
		}
	}
	seek(sess, tp, start)
	return start, nil
}

// initialTimestamp is the ListOffsets timestamp initialOffset names.
func (k *progressKeeper) initialTimestamp() int64 {
	if k.initial == config.InitialOffsetLatest {
		return sarama.OffsetNewest
	}
	return sarama.OffsetOldest
}

// initialOffsets reads the offset initialOffset names of each of tps with one
// ListOffsets request per partition leader, the leaders asked at the same time: across
// a distance a read per partition, one after the other, was a round trip each before
// the first record. A partition it could not read (no leader known, an error, a broker
// that failed) is left out: startAtInitialOffset then asks for it alone, with the
// client's retries.
func (k *progressKeeper) initialOffsets(source sarama.Client, tps []partitionKey) map[partitionKey]int64 {
	at := k.initialTimestamp()
	requests := map[*sarama.Broker]*sarama.OffsetRequest{}
	asked := map[*sarama.Broker][]partitionKey{}
	for _, tp := range tps {
		b, err := source.Leader(tp.topic, tp.partition)
		if err != nil {
			continue
		}
		req := requests[b]
		if req == nil {
			req = sarama.NewOffsetRequest(source.Config().Version)
			requests[b] = req
		}
		req.AddBlock(tp.topic, tp.partition, at, 1)
		asked[b] = append(asked[b], tp)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	out := make(map[partitionKey]int64, len(tps))
	for b, req := range requests {
		wg.Go(func() {
			resp, err := b.GetAvailableOffsets(req)
			if err != nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			for _, tp := range asked[b] {
				if blk := resp.GetBlock(tp.topic, tp.partition); blk != nil && errors.Is(blk.Err, sarama.ErrNoError) && len(blk.Offsets) == 1 {
					out[tp] = blk.Offsets[0]
				}
			}
		})
	}
	wg.Wait()
	return out
}

// claimKeys lists a session's claims.
func claimKeys(claims map[string][]int32) []partitionKey {
	var out []partitionKey
	for topic, parts := range claims {
		for _, p := range parts {
			out = append(out, partitionKey{topic, p})
		}
	}
	return out
}

// lookup returns the claimed partitions the source group has no offset for, those
// whose source group offset names another incarnation of the topic (with the ID it
// names), and, when there are any of the first, the target-side group's offsets of them.
func (k *progressKeeper) lookup(claims map[string][]int32, ids map[string]string) ([]partitionKey, map[partitionKey]string, *sarama.OffsetFetchResponse, error) {
	src, err := listOffsets(k.sourceAdmin, k.sourceGroup, claims)
	if err != nil {
		return nil, nil, nil, err
	}
	var none []partitionKey
	stale := map[partitionKey]string{}
	ask := map[string][]int32{}
	for topic, parts := range claims {
		for _, p := range parts {
			if b := blockOf(src, topic, p); b != nil && errors.Is(b.Err, sarama.ErrNoError) && b.Offset >= 0 {
				if verdict, stored := judgeEntry(b.Metadata, sourceCommitMetadata, ids[topic]); verdict == entryOtherIncarnation {
					stale[partitionKey{topic, p}] = stored
				}
				continue
			}
			none = append(none, partitionKey{topic, p})
			ask[k.targetName(topic)] = append(ask[k.targetName(topic)], p)
		}
	}
	if len(none) == 0 {
		return nil, stale, nil, nil
	}
	sort.Slice(none, func(i, j int) bool {
		if none[i].topic != none[j].topic {
			return none[i].topic < none[j].topic
		}
		return none[i].partition < none[j].partition
	})
	tgt, err := listOffsets(k.targetAdmin, k.group, ask)
	if errors.Is(err, sarama.ErrGroupAuthorizationFailed) || errors.Is(err, sarama.ErrTopicAuthorizationFailed) {
		k.log.Error(err, "Cannot read the target-side progress: grant the mirror's target principal Read on this group and Read and Describe on the target topics; partitions without a source group offset start at initialOffset",
			"initialOffset", k.initial)
		return none, stale, nil, nil
	}
	return none, stale, tgt, err
}

// blockOf is resp's answer for one partition, nil when there is none.
func blockOf(resp *sarama.OffsetFetchResponse, topic string, partition int32) *sarama.OffsetFetchResponseBlock {
	if resp == nil {
		return nil
	}
	return resp.GetBlock(topic, partition)
}

// listOffsets reads a group's committed offsets of partitions. A group that does not
// exist has none: its response is nil, without an error (the source group right after
// its offsets expired and before this member joined, the target-side group before the
// first commit).
func listOffsets(admin sarama.ClusterAdmin, group string, partitions map[string][]int32) (*sarama.OffsetFetchResponse, error) {
	resp, err := admin.ListConsumerGroupOffsets(group, partitions)
	if errors.Is(err, sarama.ErrGroupIDNotFound) {
		return nil, nil
	}
	return resp, err
}

// progressCommitter commits to the source group first and then hands the commit points
// the source coordinator confirmed to the progress keeper, so that the target-side
// progress never runs ahead of the source commit of the same acked point.
type progressCommitter struct {
	source offsetCommitter
	k      *progressKeeper
}

func newProgressCommitter(source offsetCommitter, k *progressKeeper) offsetCommitter {
	if k == nil {
		return source
	}
	return &progressCommitter{source: source, k: k}
}

// Commit commits to the source group, then queues the confirmed offsets for the target.
func (p *progressCommitter) Commit(offs []commitOffset) error {
	if err := p.source.Commit(offs); err != nil {
		return err
	}
	confirmed := make(map[partitionKey]position, len(offs))
	for _, o := range offs {
		if o.err == nil {
			confirmed[partitionKey{o.topic, o.partition}] = position{next: o.next, topicID: o.topicID}
		}
	}
	if len(confirmed) > 0 {
		p.k.record(confirmed)
	}
	return nil
}
