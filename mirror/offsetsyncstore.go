package mirror

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/IBM/sarama"
	"github.com/go-logr/logr"
)

// Offset translation: from the offset syncs read back from the sync topic (see
// offsetsync.go), the target offset from which a consumer reads every record at or
// after a source offset, whatever order the syncs of several writers came in.
//
// The syncs of a partition are kept per chain (one assignment's copies). Within a chain
// source and target offsets grow together, so its syncs say, for a source offset s:
//   - a copy of s is at target t: s is a sync, or lies between two linked syncs (the
//     second names the first as Previous) and before the gap at the end of their run
//     (the records the handler dropped). This is a known copy;
//   - s may have a copy after target t, where t is the chain's last sync before s: s
//     lies between two syncs that are not linked (a sync was dropped), or after the
//     chain's last sync (records acked since, whose sync is not written yet). This is
//     a possible copy. A chain whose last sync has End has no copy after it;
//   - the chain holds no copy of s: s is before its first record, or in the gap of a
//     linked run.
//
// The translation of source offset c is the lowest, over every s at or after c, of
// the last known copy of s or, when s has none, of the lowest target offset a possible
// copy of it may have. A consumer reading from there reads a copy of every record at
// or after c that the syncs know of. The later copy wins when a record was copied
// twice: after a restart the new owner's copies are later on the target, and once it
// has passed the old copies the translation resumes after its own, exactly. After a
// drain that gave up, the old owner's late copies are later than the new owner's copies
// of the same records, while the new owner's copies of the records after them are
// earlier: the lowest of those wins, never skipping either.
//
// One assumption lets old chains go: the records a chain acked after its last sync (a
// process killed before writing it) are copied again by any owner that started after
// that sync (its first record landed later on the target) and started at or before
// them, since an owner starts at the group's committed offset, which is never past a
// record acked after the commit. So a chain's possible copies after its last sync count
// only up to the first record of the next chain; without it every old chain would hold
// the translation at its last sync. A translation is exact when no chain has a (known or
// possible) copy of a record before c at or after the translated offset.
//
// A source topic deleted and created again under the same name starts its offsets at 0
// again (incarnation.go): the old topic's syncs say nothing about the new topic's
// records, and translating through them would send a consumer to the old topic's
// copies, "exactly". So the store keeps each source partition's chains per topic ID
// (the ID each sync names), and a translation uses the chains of the topic's current ID
// and never those of another; once the current ID is known, the others are dropped (IDs
// are never reused). Syncs that name no ID come from a source cluster without topic IDs
// (before Kafka 2.8: the topic has none either, and they are all used, as before) or
// from an engine of an earlier release. On a cluster with topic IDs those are read
// together with the chains of the current ID: leaving them out would skip the copies
// of a process of the earlier release that held the partition during a rolling
// upgrade. One that still wrote after the first record of a chain of the current ID
// mirrored the current topic; one that stopped before is doubtful (it may be a deleted
// topic's), and a group offset at or below a copy of a doubtful chain is not translated
// (no checkpoint is written for it) rather than guessed: once the group passes the
// copies of the earlier release that came before the upgraded engines, it translates
// again. (The one case this cannot tell: a process of the earlier release whose drain
// gave up across the deletion, its old-topic copies landing after an upgraded process
// already mirrored the new topic.)

// syncChain is one chain's syncs in a store, sorted by source offset. points[0] is the
// chain's first record (a point made from ChainSource and ChainTarget when that sync
// itself was not read: compacted, or dropped by the writer).
type syncChain struct {
	// source and target name the chain (OffsetSync.ChainSource, ChainTarget); -1 and -1
	// for the syncs of version 1, which all form one chain of unknown start.
	source, target int64
	points         []OffsetSync
	// ended reports that the chain's last sync had End: no copy follows it.
	ended bool
}

func (ch *syncChain) legacy() bool { return ch.source < 0 }

func (ch *syncChain) last() OffsetSync { return ch.points[len(ch.points)-1] }

// add stores s, the newest sync of the chain. A sync at or below the newest one stored
// (the chain's end repeating its last position; in a version 1 chain, the partition
// mirrored again by a new owner) replaces every sync at or above it.
func (ch *syncChain) add(s OffsetSync) {
	pts := ch.points
	for len(pts) > 0 && pts[len(pts)-1].SourceOffset >= s.SourceOffset {
		pts = pts[:len(pts)-1]
	}
	ch.points = append(pts, s)
	ch.ended = s.End
}

// storedPartition holds one source partition's chains.
type storedPartition struct {
	// chains are sorted by target (the target offset of their first record).
	chains []*syncChain
	// total counts the points of all chains.
	total int
	// floor and droppedBelow keep what the chains dropped for the bound covered: below
	// source offset floor nothing translates, and no copy of theirs is at or after
	// target offset droppedBelow + 1 (see drop).
	floor, droppedBelow int64
	// firstTarget is the lowest target of any chain stored, dropped ones included: the
	// chains that name no topic ID that stopped writing before it are doubtful (see
	// translatable).
	firstTarget int64
	// doubtful are chains that may be another incarnation's (translatable): an offset
	// at or below a copy of theirs is not translated.
	doubtful map[*syncChain]bool
	// union caches translatable's chains of this ID with those of no ID, until either
	// changes.
	union *storedPartition
	// cached holds views() until the chains change.
	cached []chainView
}

// offsetSyncStore holds the syncs read from the sync topic, per source partition and,
// within it, per source topic ID ("" for syncs that name none).
type offsetSyncStore struct {
	topic string
	next  int64 // the next offset of the sync topic to read
	parts map[partitionKey]map[string]*storedPartition
	// pins are the source offsets whose translation thinning keeps as exact as the
	// syncs read make it: the committed offsets of the groups being translated, per
	// group (see pinGroup).
	pins map[string]map[partitionKey]int64
}

func newOffsetSyncStore(topic string) *offsetSyncStore {
	return &offsetSyncStore{topic: topic, parts: map[partitionKey]map[string]*storedPartition{},
		pins: map[string]map[partitionKey]int64{}}
}

// pinGroup makes offsets (a group's committed offsets) the group's pins, replacing its
// earlier ones. When the store thins a chain, it keeps the two syncs around every
// pinned offset (the last one before it and the next), so an idle group's position
// translates as exactly after any number of later syncs as when they were few: with
// exactly-once every transaction's marker changes the offset delta and needs a sync,
// and the bound of a partition's syncs is reached after about as many transactions.
// Syncs read before a pin was set may have been thinned already: pin, then read.
func (st *offsetSyncStore) pinGroup(group string, offsets map[partitionKey]int64) {
	if len(offsets) == 0 {
		delete(st.pins, group)
		return
	}
	st.pins[group] = offsets
}

// retainPins drops the pins of every group not in groups (gone, or no longer selected).
func (st *offsetSyncStore) retainPins(groups []string) {
	for g := range st.pins {
		if !slices.Contains(groups, g) {
			delete(st.pins, g)
		}
	}
}

// pinned returns the pinned source offsets of tp, sorted.
func (st *offsetSyncStore) pinned(tp partitionKey) []int64 {
	var out []int64
	for _, offsets := range st.pins {
		if o, ok := offsets[tp]; ok {
			out = append(out, o)
		}
	}
	slices.Sort(out)
	return out
}

// partition returns the syncs stored for partition tp of the topic with ID topicID, nil
// when there are none.
func (st *offsetSyncStore) partition(tp partitionKey, topicID string) *storedPartition {
	return st.parts[tp][topicID]
}

// add stores s, read from the sync topic for partition tp of the topic with ID topicID.
func (st *offsetSyncStore) add(tp partitionKey, topicID string, s OffsetSync) {
	byID := st.parts[tp]
	if byID == nil {
		byID = map[string]*storedPartition{}
		st.parts[tp] = byID
	}
	sp := byID[topicID]
	if sp == nil {
		sp = &storedPartition{droppedBelow: -1, firstTarget: math.MaxInt64}
		byID[topicID] = sp
	}
	sp.cached = nil
	for _, other := range byID {
		other.union = nil
	}
	ch := sp.chain(s)
	before := len(ch.points)
	ch.add(s)
	sp.total += len(ch.points) - before
	if sp.total > maxOffsetSyncsPerPartition {
		pinned := st.pinned(tp)
		for sp.total > maxOffsetSyncsPerPartition {
			sp.shrink(pinned)
		}
	}
}

// chain returns the chain of s, created when s is its first sync read.
func (sp *storedPartition) chain(s OffsetSync) *syncChain {
	source, target := s.ChainSource, s.ChainTarget
	if source < 0 || target < 0 {
		source, target = -1, -1
	}
	i := sort.Search(len(sp.chains), func(i int) bool { return sp.chains[i].target >= target })
	if i < len(sp.chains) && sp.chains[i].target == target && sp.chains[i].source == source {
		return sp.chains[i]
	}
	ch := &syncChain{source: source, target: target}
	sp.firstTarget = min(sp.firstTarget, target)
	if source >= 0 && s.SourceOffset > source {
		ch.points = append(ch.points, OffsetSync{SourceOffset: source, TargetOffset: target, Previous: -1, ChainSource: source, ChainTarget: target})
		sp.total++
	}
	sp.chains = append(sp.chains, nil)
	copy(sp.chains[i+1:], sp.chains[i:])
	sp.chains[i] = ch
	return ch
}

// shrink makes room for one more sync: it thins the chain with the most syncs, keeping
// the syncs around the pinned source offsets (sorted), or, when no chain has enough to
// thin (or the pins keep every one), drops the oldest chain.
func (sp *storedPartition) shrink(pinned []int64) {
	var big *syncChain
	for _, ch := range sp.chains {
		if big == nil || len(ch.points) > len(big.points) {
			big = ch
		}
	}
	if n := len(big.points); n >= 4 {
		big.points = thin(big.points, pinned)
		if len(big.points) < n {
			sp.total -= n - len(big.points)
			sp.cached = nil
			return
		}
	}
	sp.drop()
}

// drop forgets the oldest chain. Its copies are all before its last sync's source
// offset + 1, and its possible copies after that before the first record of the next
// chain (see the comment at the top): translations below the floor this leaves are
// refused (not ok) rather than guessed, and no translation claims to be exact where
// the dropped copies could be read again.
func (sp *storedPartition) drop() {
	views := sp.views()
	v := views[0]
	last := v.ch.last()
	floor, below := last.SourceOffset+1, last.TargetOffset
	switch {
	case v.ch.ended:
	case v.nextTarget < math.MaxInt64:
		floor, below = max(floor, v.nextSource), v.nextTarget-1
	default:
		floor, below = math.MaxInt64, math.MaxInt64
	}
	sp.floor, sp.droppedBelow = max(sp.floor, floor), max(sp.droppedBelow, below)
	sp.total -= len(v.ch.points)
	sp.chains, sp.cached = sp.chains[1:], nil
}

// thin drops every other sync of the older half of list, in place, keeping the first
// (the chain's first record) and, for every pinned source offset (sorted), the last
// sync before it and the one after that: together they translate it as before
// (exactly, when they were linked) and say where the chain's copies before it end. The
// other syncs left there no longer follow each other (their Previous no longer
// matches), so offsets between them translate to the safe side: never skipping,
// repeating at most the records between two kept syncs. Repeated thinning spaces old
// syncs further and further apart, as MirrorMaker 2's offset sync store does.
func thin(list []OffsetSync, pinned []int64) []OffsetSync {
	half := len(list) / 2
	keep := make([]bool, half)
	for i := 0; i < half; i += 2 {
		keep[i] = true
	}
	for _, c := range pinned {
		i := sort.Search(len(list), func(i int) bool { return list[i].SourceOffset >= c }) - 1
		for _, j := range []int{i, i + 1} {
			if j >= 0 && j < half {
				keep[j] = true
			}
		}
	}
	n := 0
	for i := range half {
		if keep[i] {
			list[n] = list[i]
			n++
		}
	}
	n += copy(list[n:], list[half:])
	return list[:n]
}

// chainView is a chain as one translation sees it: with the first record of the next
// chain, the bound of its possible copies after its last sync.
type chainView struct {
	ch *syncChain
	// nextSource and nextTarget are the lowest source offset and the lowest target
	// offset among the first records of the chains that started after the chain's last
	// sync (math.MaxInt64 when none did): the chain's records after its last sync from
	// nextSource on were copied again by them, and its copies of them are before
	// nextTarget.
	nextSource, nextTarget int64
}

// views returns the partition's chains with their bounds, in the order of chains.
func (sp *storedPartition) views() []chainView {
	if sp.cached != nil {
		return sp.cached
	}
	n := len(sp.chains)
	// minSource[i] is the lowest first source offset of chains i..n-1 (their targets
	// grow with i).
	minSource := make([]int64, n+1)
	minSource[n] = math.MaxInt64
	for i := n - 1; i >= 0; i-- {
		minSource[i] = min(minSource[i+1], sp.chains[i].points[0].SourceOffset)
	}
	views := make([]chainView, n)
	for i, ch := range sp.chains {
		lastTarget := ch.last().TargetOffset
		j := sort.Search(n, func(j int) bool { return sp.chains[j].target > lastTarget })
		views[i] = chainView{ch: ch, nextSource: minSource[j], nextTarget: math.MaxInt64}
		if j < n {
			views[i].nextTarget = sp.chains[j].target
		}
	}
	sp.cached = views
	return views
}

// What a chain says about one source offset (see the comment at the top).
const (
	noCopy = iota
	knownCopy
	possibleCopy
)

// piece is what a chain says about the source offsets from one up to end (exclusive):
// for knownCopy, the copy of s is at s + value; for possibleCopy, a copy may be at
// value or after.
type piece struct {
	kind  int
	value int64
	end   int64
}

// at returns the piece of v's chain that holds source offset s.
func (v *chainView) at(s int64) piece {
	pts := v.ch.points
	i := sort.Search(len(pts), func(i int) bool { return pts[i].SourceOffset > s }) - 1
	if i < 0 {
		return piece{noCopy, 0, pts[0].SourceOffset}
	}
	p := pts[i]
	if p.SourceOffset == s {
		return piece{knownCopy, p.TargetOffset - s, s + 1}
	}
	if i+1 < len(pts) {
		next := pts[i+1]
		if next.Previous != p.SourceOffset {
			return piece{possibleCopy, p.TargetOffset + 1, next.SourceOffset}
		}
		if run := runEnd(p, next); s < run {
			return piece{knownCopy, p.TargetOffset - p.SourceOffset, run}
		}
		return piece{noCopy, 0, next.SourceOffset}
	}
	if v.ch.ended || s >= v.nextSource {
		return piece{noCopy, 0, math.MaxInt64}
	}
	return piece{possibleCopy, p.TargetOffset + 1, v.nextSource}
}

// runEnd is where the run of records after linked sync p, mirrored with p's delta,
// ends (exclusive): at the gap before next, or at next.
func runEnd(p, next OffsetSync) int64 {
	return max(min(p.SourceOffset+next.TargetOffset-p.TargetOffset, next.SourceOffset), p.SourceOffset+1)
}

// lowest returns the lowest target offset at which v's chain has a known or possible
// copy of a record at or after s (math.MaxInt64 for none). A chain's target offsets
// grow with its source offsets, so it is that of the first piece with a copy.
func (v *chainView) lowest(s int64) int64 {
	for s < math.MaxInt64 {
		switch pc := v.at(s); pc.kind {
		case knownCopy:
			return s + pc.value
		case possibleCopy:
			return pc.value
		default:
			s = pc.end
		}
	}
	return math.MaxInt64
}

// below returns the highest target offset at which v's chain may have a copy of a
// record before source offset c (-1 for none; math.MaxInt64 when unbounded).
func (v *chainView) below(c int64) int64 {
	pts := v.ch.points
	s := c - 1
	i := sort.Search(len(pts), func(i int) bool { return pts[i].SourceOffset > s }) - 1
	if i < 0 {
		return -1
	}
	p := pts[i]
	switch {
	case p.SourceOffset == s:
		return p.TargetOffset
	case i+1 < len(pts) && pts[i+1].Previous == p.SourceOffset:
		return p.TargetOffset + min(s, runEnd(p, pts[i+1])-1) - p.SourceOffset
	case i+1 < len(pts):
		return pts[i+1].TargetOffset - 1
	case v.ch.ended:
		return p.TargetOffset
	case v.nextTarget < math.MaxInt64:
		return v.nextTarget - 1
	default:
		return math.MaxInt64
	}
}

// translate returns the target offset from which a consumer of tp's target partition
// reads every record at or after source offset committed (a group's committed offset:
// the next record to read) of the topic whose current ID is topicID ("" when the source
// gives none), and whether it is exact (no record before committed read again). Only
// the syncs of that ID are used. ok is false when no chain of it starts at or below
// committed (the syncs of its records are gone, or were never written) or committed is
// below what dropped chains covered. See the comment at the top.
func (st *offsetSyncStore) translate(tp partitionKey, topicID string, committed int64) (target int64, exact, ok bool) {
	sp := st.translatable(tp, topicID)
	if sp == nil || len(sp.chains) == 0 || committed < sp.floor {
		return 0, false, false
	}
	all := sp.views()
	known, legacy := false, false
	// views are the chains with a copy at or after committed: an old chain drops out
	// here, once.
	views := make([]chainView, 0, 4)
	for i := range all {
		known = known || all[i].ch.points[0].SourceOffset <= committed
		legacy = legacy || all[i].ch.legacy()
		if all[i].lowest(committed) < math.MaxInt64 {
			if sp.doubtful[all[i].ch] {
				// Its copy may be the only one of a record of the topic, or a record
				// of a deleted topic of the same name: no translation can tell.
				return 0, false, false
			}
			views = append(views, all[i])
		}
	}
	if !known {
		return 0, false, false
	}
	target = math.MaxInt64
	for s := committed; ; {
		// Over [s, end) every chain says the same kind of thing; the lowest last copy
		// there is at s (target offsets grow with source offsets).
		end, latest, possible := int64(math.MaxInt64), int64(math.MinInt64), int64(math.MaxInt64)
		for i := range views {
			pc := views[i].at(s)
			end = min(end, pc.end)
			switch pc.kind {
			case knownCopy:
				latest = max(latest, s+pc.value)
			case possibleCopy:
				possible = min(possible, pc.value)
			}
		}
		if latest > math.MinInt64 {
			target = min(target, latest)
		} else {
			target = min(target, possible)
		}
		if end == math.MaxInt64 {
			break
		}
		// No later source offset translates lower than the lowest copy any chain
		// still has (a version 1 chain's stretches may not grow: look at all).
		next := int64(math.MaxInt64)
		for i := range views {
			next = min(next, views[i].lowest(end))
		}
		if next >= target && !legacy {
			break
		}
		s = end
	}
	if target == math.MaxInt64 {
		// No record at or after committed is on the target yet: the next ones land
		// after every copy known.
		target = 0
		for i := range all {
			target = max(target, all[i].ch.last().TargetOffset+1)
		}
	}
	exact = sp.droppedBelow < target
	for i := range all {
		exact = exact && all[i].below(committed) < target
	}
	return target, exact, true
}

// translatable returns the chains that translate offsets of partition tp of the topic
// whose current ID is topicID ("" when the source gives none), nil when there are
// none: that ID's chains and, when it is known, with the chains that name no ID (see
// the comment at the top), those that stopped writing before its first chain's first
// record marked doubtful. The chains of every other ID are dropped.
func (st *offsetSyncStore) translatable(tp partitionKey, topicID string) *storedPartition {
	byID := st.parts[tp]
	if topicID == "" {
		return byID[""]
	}
	for id := range byID {
		if id != topicID && id != "" {
			delete(byID, id)
		}
	}
	own, unnamed := byID[topicID], byID[""]
	if own == nil || unnamed == nil || len(unnamed.chains) == 0 && unnamed.floor == 0 {
		return own
	}
	if own.union != nil {
		return own.union
	}
	merged := &storedPartition{chains: append(slices.Clone(own.chains), unnamed.chains...),
		floor: max(own.floor, unnamed.floor), droppedBelow: max(own.droppedBelow, unnamed.droppedBelow),
		doubtful: map[*syncChain]bool{}}
	sort.SliceStable(merged.chains, func(a, b int) bool { return merged.chains[a].target < merged.chains[b].target })
	for _, ch := range unnamed.chains {
		if ch.last().TargetOffset < own.firstTarget {
			merged.doubtful[ch] = true
		}
	}
	own.union = merged
	return merged
}

// readOffsetSyncs reads the sync topic from st.next up to its end as of the call.
func readOffsetSyncs(ctx context.Context, client sarama.Client, st *offsetSyncStore, log logr.Logger) error {
	end, err := client.GetOffset(st.topic, 0, sarama.OffsetNewest)
	if err != nil {
		if errors.Is(err, sarama.ErrUnknownTopicOrPartition) {
			return nil
		}
		return fmt.Errorf("while reading the end of offset sync topic %q: %w", st.topic, err)
	}
	if st.next >= end {
		return nil
	}
	start, err := client.GetOffset(st.topic, 0, sarama.OffsetOldest)
	if err != nil {
		return fmt.Errorf("while reading the start of offset sync topic %q: %w", st.topic, err)
	}
	consumer, err := sarama.NewConsumerFromClient(client)
	if err != nil {
		return fmt.Errorf("while reading offset sync topic %q: %w", st.topic, err)
	}
	defer consumer.Close()
	pc, err := consumer.ConsumePartition(st.topic, 0, max(st.next, start))
	if err != nil {
		return fmt.Errorf("while reading offset sync topic %q: %w", st.topic, err)
	}
	defer pc.AsyncClose()
	for {
		select {
		case m, ok := <-pc.Messages():
			if !ok {
				return fmt.Errorf("while reading offset sync topic %q: the consumer closed", st.topic)
			}
			st.next = m.Offset + 1
			tp, kerr := parseOffsetSyncKey(m.Key)
			s, topicID, verr := decodeOffsetSync(m.Value)
			if err := errors.Join(kerr, verr); err != nil {
				log.V(1).Info("Ignored a record of the offset sync topic", "offset", m.Offset, "reason", err.Error())
			} else {
				st.add(tp, topicID, s)
			}
			if st.next >= end {
				return nil
			}
		case cerr := <-pc.Errors():
			return fmt.Errorf("while reading offset sync topic %q: %w", st.topic, cerr)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
