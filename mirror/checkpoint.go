package mirror

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"sync"
	"time"

	"github.com/IBM/sarama"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/topics"
)

// Group checkpoints: the committed offsets of source consumer groups, translated to
// target offsets through the offset syncs (offsetsync.go) and committed to the groups
// of the same name on the target, so that their consumers can move to the target and
// go on where they were, skipping nothing.
//
// A target group is written only while it has no members (its consumers have not
// moved yet, or have all left): a live group is never moved. A translated offset below
// the target group's committed offset is not written (the consumers that moved are
// further already); it is logged and counted. A translated offset equal to the
// target group's is committed again: its metadata (CheckpointMetadata) renews the
// checkpoint time, so an idle source group still shows a recent checkpoint and an old
// one means the checkpoints stopped (the operator reports it from the target group
// alone, controllers/groupstatus.go).

// groupCheckpointLimit bounds one round of translations, so a cluster that does not
// answer delays the next round instead of holding it forever.
const groupCheckpointLimit = time.Minute

// PartitionTranslation is the translation of one source partition's committed offset.
type PartitionTranslation struct {
	// Topic and Partition name the source partition; TargetTopic is its target topic
	// (renamed by topics.rename), same partition number.
	Topic       string
	Partition   int32
	TargetTopic string
	// SourceOffset is the source group's committed offset (the next record to read).
	SourceOffset int64
	// SourceTopicID is the source topic's current ID (its incarnation): only the offset
	// syncs that name it translate SourceOffset. "" when the source cluster gives no
	// topic IDs (then the syncs that name none translate it).
	SourceTopicID string
	// TargetOffset is where a consumer of the target topic reads every record at or
	// after SourceOffset; -1 when no offset sync of the topic's current ID is at or
	// below SourceOffset yet (or the topic could not be described).
	TargetOffset int64
	// Exact reports that no record before SourceOffset is read again from TargetOffset.
	// When false, the records between the last offset sync and SourceOffset (at most
	// offsetSyncEveryRecords, or what the mirror acked in offsetSyncInterval) are read twice.
	Exact bool
	// TargetEnd is the target partition's end offset; Lag is TargetEnd - TargetOffset
	// (-1 when unknown).
	TargetEnd, Lag int64
	// TargetCommitted is the target group's committed offset, -1 when it has none.
	TargetCommitted int64
	// Committed reports that TargetOffset was committed to the target group.
	Committed bool
	// Renewed reports that the committed TargetOffset equalled the target group's
	// offset: the group did not move, only its checkpoint time was renewed.
	Renewed bool
	// Skipped says why TargetOffset was not committed ("" when it was, or when no
	// commit was asked).
	Skipped string

	// The fields below are filled by TranslateGroup (`offsets translate`), not by the
	// engine's checkpoints (translatereport.go).

	// MirroredTo is how far the mirror got in the source partition: the commit point
	// it stored (every record before it is on the target), -1 when unknown.
	MirroredTo int64
	// AheadOfMirror reports that the source group committed past MirroredTo: the
	// records between are not on the target yet (not mirrored that far yet). A consumer
	// moved now reads them again at TargetOffset once the mirror copies them, so
	// TranslateGroup does not commit such a partition and reports Exact false.
	AheadOfMirror bool
	// TargetStart is the target partition's log start offset, read for a partition
	// the source group never committed (where auto.offset.reset earliest starts), else -1.
	TargetStart int64
}

// NotCommitted reports that the source group has no committed offset for the
// partition (a row of GroupTranslation.Uncommitted): nothing is translated there.
func (pt *PartitionTranslation) NotCommitted() bool { return pt.SourceOffset < 0 }

// GroupTranslation is the translation of one source group.
type GroupTranslation struct {
	// Group is the source group and the target group of the same name.
	Group string
	// ActiveMembers is the number of members of the target group; while it is not 0
	// nothing is committed.
	ActiveMembers int
	// Partitions are sorted by topic and partition.
	Partitions []PartitionTranslation
	// Uncommitted are the partitions of the mirrored topics that the source group has
	// no committed offset for, sorted likewise: nothing is translated or committed there
	// (SourceOffset and TargetOffset -1), and the target group keeps TargetCommitted or,
	// without one, its consumers start at their auto.offset.reset (TargetStart or
	// TargetEnd). Filled by TranslateGroup only.
	Uncommitted []PartitionTranslation
}

// translator translates source group offsets through the offset syncs it has read.
type translator struct {
	cfg         *config.Config
	sel         *topics.Selector
	sourceAdmin sarama.ClusterAdmin
	targetAdmin sarama.ClusterAdmin
	target      sarama.Client
	store       *offsetSyncStore
	log         logr.Logger
	// failback, when set, translates the offsets below a failback mirror's start
	// through the failed-over mirror's offset syncs (failback.go).
	failback *failbackTranslation
}

func newTranslator(cfg *config.Config, sel *topics.Selector, c *connections, log logr.Logger) *translator {
	return &translator{cfg: cfg, sel: sel, sourceAdmin: c.sourceAdmin, targetAdmin: c.targetAdmin, target: c.targetMeta,
		store: newOffsetSyncStore(OffsetSyncTopic(cfg.ConsumerGroup)), log: log}
}

// translate reads group's committed offsets and the new offset syncs, and translates
// the offsets of the mirrored topics. With commit, it then commits them to the target
// group (see commit).
func (tr *translator) translate(ctx context.Context, group string, commit bool) (*GroupTranslation, error) {
	resp, err := tr.groupOffsets(group)
	if err != nil {
		return nil, err
	}
	return tr.translateOffsets(ctx, group, resp, commit)
}

// groupOffsets reads group's committed offsets and pins those of the mirrored topics in
// the store (pinGroup), so that the syncs read from now on keep their translations
// exact however many follow them.
func (tr *translator) groupOffsets(group string) (*sarama.OffsetFetchResponse, error) {
	resp, err := listOffsets(tr.sourceAdmin, group, nil)
	if err != nil {
		return nil, fmt.Errorf("while reading the offsets of source group %q: %w", group, err)
	}
	pins := map[partitionKey]int64{}
	if resp != nil {
		for topic, parts := range resp.Blocks {
			if !tr.sel.Matches(topic) {
				continue
			}
			for p, b := range parts {
				if errors.Is(b.Err, sarama.ErrNoError) && b.Offset >= 0 {
					pins[partitionKey{topic, p}] = b.Offset
				}
			}
		}
	}
	tr.store.pinGroup(group, pins)
	return resp, nil
}

// translateOffsets reads the new offset syncs and translates resp, group's committed
// offsets (groupOffsets), as translate does.
func (tr *translator) translateOffsets(ctx context.Context, group string, resp *sarama.OffsetFetchResponse, commit bool) (*GroupTranslation, error) {
	if err := readOffsetSyncs(ctx, tr.target, tr.store, tr.log); err != nil {
		return nil, err
	}
	gt := &GroupTranslation{Group: group}
	if resp == nil {
		return gt, nil
	}
	ids, err := tr.sourceTopicIDs(ctx, resp)
	if err != nil {
		return nil, err
	}
	targetParts := map[string][]int32{}
	for topic, parts := range resp.Blocks {
		if !tr.sel.Matches(topic) {
			continue
		}
		for p, b := range parts {
			if !errors.Is(b.Err, sarama.ErrNoError) || b.Offset < 0 {
				continue
			}
			id, described := ids[topic]
			pt := PartitionTranslation{Topic: topic, Partition: p, TargetTopic: tr.sel.TargetName(topic),
				SourceOffset: b.Offset, SourceTopicID: id, TargetOffset: -1, TargetCommitted: -1, TargetEnd: -1, Lag: -1, MirroredTo: -1, TargetStart: -1}
			// A topic the source did not describe has no known incarnation: nothing
			// tells which syncs are its own.
			if described {
				if to, exact, ok := tr.store.translate(partitionKey{topic, p}, id, b.Offset); ok {
					pt.TargetOffset, pt.Exact = to, exact
				}
				if to, ok := tr.failback.translate(partitionKey{topic, p}, b.Offset); ok && pt.TargetOffset < 0 {
					pt.TargetOffset, pt.Exact = to, true
				}
			}
			gt.Partitions = append(gt.Partitions, pt)
			targetParts[pt.TargetTopic] = append(targetParts[pt.TargetTopic], p)
		}
	}
	sortTranslations(gt.Partitions)
	if len(gt.Partitions) == 0 {
		return gt, nil
	}
	for i := range gt.Partitions {
		pt := &gt.Partitions[i]
		if end, err := tr.target.GetOffset(pt.TargetTopic, pt.Partition, sarama.OffsetNewest); err == nil {
			pt.TargetEnd = end
			if pt.TargetOffset >= 0 {
				pt.Lag = max(end-pt.TargetOffset, 0)
			}
		}
	}
	if err := tr.readTargetGroup(gt, targetParts); err != nil {
		return gt, err
	}
	if commit {
		return gt, tr.commit(gt)
	}
	return gt, nil
}

// sourceTopicIDs reads the current IDs of the mirrored topics resp names (see
// describeTopicIDs), so that their offsets are translated only through the syncs of the
// same incarnation.
func (tr *translator) sourceTopicIDs(ctx context.Context, resp *sarama.OffsetFetchResponse) (map[string]string, error) {
	var names []string
	for topic := range resp.Blocks {
		if tr.sel.Matches(topic) {
			names = append(names, topic)
		}
	}
	sort.Strings(names)
	ids, err := describeTopicIDs(ctx, tr.sourceAdmin, names)
	if err != nil {
		return nil, fmt.Errorf("while reading the topic IDs of source topics %v: %w", names, err)
	}
	return ids, nil
}

// readTargetGroup fills in the target group's members and committed offsets.
func (tr *translator) readTargetGroup(gt *GroupTranslation, partitions map[string][]int32) error {
	desc, err := tr.targetAdmin.DescribeConsumerGroups([]string{gt.Group})
	if err != nil {
		return fmt.Errorf("while describing group %q on the target cluster: %w", gt.Group, err)
	}
	for _, d := range desc {
		if d.GroupId == gt.Group {
			gt.ActiveMembers = len(d.Members)
		}
	}
	resp, err := listOffsets(tr.targetAdmin, gt.Group, partitions)
	if err != nil {
		return fmt.Errorf("while reading the offsets of group %q on the target cluster: %w", gt.Group, err)
	}
	for i := range gt.Partitions {
		pt := &gt.Partitions[i]
		if b := blockOf(resp, pt.TargetTopic, pt.Partition); b != nil && errors.Is(b.Err, sarama.ErrNoError) && b.Offset >= 0 {
			pt.TargetCommitted = b.Offset
		}
	}
	return nil
}

// Reasons a translated offset is not committed.
const (
	skipActive      = "the target group has active members"
	skipNoSync      = "no offset sync at or below the source offset yet"
	skipBackwards   = "the target group is further already"
	skipNotMirrored = "not mirrored that far yet"
)

// commit commits gt's translated offsets to the target group while it has no active
// members, never moving a partition backwards; an offset the group holds already is
// committed again to renew its checkpoint time (see the comment at the top). Each
// commit carries CheckpointMetadata. Kafka itself refuses a commit without a
// generation to a group that has members (a consumer that joined meanwhile), so a
// group that comes alive between the check and the commit is not moved either.
func (tr *translator) commit(gt *GroupTranslation) error {
	req := sarama.NewOffsetCommitRequest(tr.target.Config(), gt.Group)
	now := time.Now()
	var todo []*PartitionTranslation
	for i := range gt.Partitions {
		pt := &gt.Partitions[i]
		switch {
		case gt.ActiveMembers > 0:
			pt.Skipped = skipActive
		case pt.AheadOfMirror:
			pt.Skipped = skipNotMirrored
		case pt.TargetOffset < 0:
			pt.Skipped = skipNoSync
		case pt.TargetCommitted > pt.TargetOffset:
			pt.Skipped = skipBackwards
		default:
			meta := CheckpointMetadata{Mirror: tr.cfg.ConsumerGroup, At: now.UnixMilli(), SourceTopic: pt.Topic,
				SourceTopicID: pt.SourceTopicID, SourceOffset: pt.SourceOffset}
			req.AddBlockWithLeaderEpoch(pt.TargetTopic, pt.Partition, pt.TargetOffset, -1, 0, meta.String())
			todo = append(todo, pt)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	coordinator, err := tr.target.Coordinator(gt.Group)
	if err != nil {
		return fmt.Errorf("while finding the coordinator of group %q on the target cluster: %w", gt.Group, err)
	}
	resp, err := coordinator.CommitOffset(req)
	if err != nil {
		_ = tr.target.RefreshCoordinator(gt.Group)
		return fmt.Errorf("while committing to group %q on the target cluster: %w", gt.Group, err)
	}
	var errs []error
	for _, pt := range todo {
		kerr := sarama.ErrIncompleteResponse
		if ps, ok := resp.Errors[pt.TargetTopic]; ok {
			if e, ok := ps[pt.Partition]; ok {
				kerr = e
			}
		}
		switch {
		case errors.Is(kerr, sarama.ErrNoError):
			pt.Committed, pt.Renewed = true, pt.TargetCommitted == pt.TargetOffset
		case errors.Is(kerr, sarama.ErrUnknownMemberId) || errors.Is(kerr, sarama.ErrIllegalGeneration) || errors.Is(kerr, sarama.ErrRebalanceInProgress):
			pt.Skipped = skipActive
		default:
			errs = append(errs, fmt.Errorf("%s/%d: %w", pt.TargetTopic, pt.Partition, kerr))
		}
	}
	if len(errs) > 0 {
		_ = tr.target.RefreshCoordinator(gt.Group)
		return fmt.Errorf("while committing to group %q on the target cluster: %w", gt.Group, errors.Join(errs...))
	}
	return nil
}

// TranslateGroup connects to both clusters of cfg, reads the offset syncs the mirror
// wrote and translates the committed offsets of source group group for the mirrored
// topics. Its result also lists the partitions of the mirrored topics the group never
// committed (Uncommitted) and says where the group is ahead of the mirror (report).
// With commit it commits them to the target group of the same name, under the same
// guard as the engine's checkpoints (not while that group has members, never
// backwards) and one more: a partition not mirrored as far as the group's offset is
// not committed. It is what `kafka-mirror offsets translate` runs.
func TranslateGroup(ctx context.Context, cfg *config.Config, group string, commit bool, opts ...Option) (*GroupTranslation, error) {
	o := options{log: logr.Discard()}
	for _, opt := range opts {
		opt(&o)
	}
	if err := cfg.TranslationRefused(nil); err != nil {
		return nil, err
	}
	sel, err := topics.NewSelector(cfg.Topics)
	if err != nil {
		return nil, err
	}
	conns, err := newLifecycle(cfg, o.log, o.kafkaOpts, 0).connect()
	if err != nil {
		return nil, err
	}
	defer conns.close()
	topic := OffsetSyncTopic(cfg.ConsumerGroup)
	if _, err := conns.targetMeta.Partitions(topic); err != nil {
		return nil, fmt.Errorf("while looking for offset sync topic %q on the target cluster (the mirror writes it when groups is set): %w", topic, err)
	}
	tr := newTranslator(cfg, sel, conns, o.log)
	gt, err := tr.translate(ctx, group, false)
	if err != nil {
		return gt, err
	}
	if err := tr.report(ctx, gt, conns.sourceMeta); err != nil {
		return gt, err
	}
	if commit {
		return gt, tr.commit(gt)
	}
	return gt, nil
}

// groupCheckpointer translates the matching source groups every groups.syncInterval
// (see the comment at the top).
type groupCheckpointer struct {
	tr      *translator
	sel     *GroupSelector
	every   time.Duration
	log     logr.Logger
	metrics *checkpointMetrics

	mu    sync.Mutex
	stats map[string]GroupStats

	// hiddenAsked holds the plain-name includes already asked for by name; noneSaid
	// that the empty selection was reported (checkHidden).
	hiddenAsked map[string]bool
	noneSaid    bool
}

// GroupStats is the state of one source group's checkpoints.
type GroupStats struct {
	// Group is the source group (and the target group of the same name).
	Group string
	// PartitionsTranslated is the number of partitions translated in the last round.
	PartitionsTranslated int
	// PartitionsCommitted counts partitions committed to the target group, all rounds
	// (renewals of an unchanged offset not counted).
	PartitionsCommitted int64
	// SkippedActive counts rounds that left the target group alone because it had members.
	SkippedActive int64
	// SkippedBackwards counts partitions not moved back (the target group was further).
	SkippedBackwards int64
	// LastCheckpoint is when the group was last translated without an error.
	LastCheckpoint time.Time
}

func compileGroupPatterns(patterns []string) ([]*regexp.Regexp, error) {
	out := make([]*regexp.Regexp, 0, len(patterns))
	for _, p := range patterns {
		re, err := regexp.Compile("^(?:" + p + ")$")
		if err != nil {
			return nil, fmt.Errorf("while compiling group expression %q: %w", p, err)
		}
		out = append(out, re)
	}
	return out, nil
}

// GroupSelector tells which source consumer groups a config's groups section selects:
// a whole name matching an include expression and no exclude expression, never the
// mirror's own groups. The engine checkpoints these groups and the operator reports
// them, so both agree.
type GroupSelector struct {
	include []*regexp.Regexp
	exclude []*regexp.Regexp
	own     map[string]bool
}

// NewGroupSelector compiles cfg.Groups (which must be set).
func NewGroupSelector(cfg *config.Config) (*GroupSelector, error) {
	if cfg.Groups == nil {
		return nil, errors.New("groups is not set")
	}
	include, err := compileGroupPatterns(cfg.Groups.Include)
	if err != nil {
		return nil, err
	}
	exclude, err := compileGroupPatterns(cfg.Groups.Exclude)
	if err != nil {
		return nil, err
	}
	return &GroupSelector{include: include, exclude: exclude,
		own: map[string]bool{cfg.ConsumerGroup: true, ProgressGroup(cfg.ConsumerGroup): true}}, nil
}

// Matches tells whether source group group is translated.
func (s *GroupSelector) Matches(group string) bool {
	if s.own[group] {
		return false
	}
	for _, re := range s.exclude {
		if re.MatchString(group) {
			return false
		}
	}
	for _, re := range s.include {
		if re.MatchString(group) {
			return true
		}
	}
	return false
}

// listSelectedGroups lists the consumer groups on admin's cluster that sel selects, sorted.
func listSelectedGroups(admin sarama.ClusterAdmin, sel *GroupSelector) ([]string, error) {
	groups, err := admin.ListConsumerGroups()
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(groups))
	for g := range groups {
		if sel.Matches(g) {
			names = append(names, g)
		}
	}
	sort.Strings(names)
	return names, nil
}

// sortTranslations orders partition translations by source topic and partition.
func sortTranslations(parts []PartitionTranslation) {
	sort.Slice(parts, func(i, j int) bool {
		a, b := parts[i], parts[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
}

func newGroupCheckpointer(cfg *config.Config, m *checkpointMetrics, log logr.Logger) (*groupCheckpointer, error) {
	sel, err := NewGroupSelector(cfg)
	if err != nil {
		return nil, err
	}
	return &groupCheckpointer{sel: sel,
		every: cfg.Groups.SyncInterval.Duration, log: log.WithName("checkpoints"), metrics: m, stats: map[string]GroupStats{}}, nil
}

// run translates every interval until ctx ends.
func (c *groupCheckpointer) run(ctx context.Context) {
	t := time.NewTicker(c.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			rctx, cancel := context.WithTimeout(ctx, groupCheckpointLimit)
			c.round(rctx)
			cancel()
		}
	}
}

// round translates and commits every matching source group once.
func (c *groupCheckpointer) round(ctx context.Context) {
	names, err := listSelectedGroups(c.tr.sourceAdmin, c.sel)
	if err != nil {
		c.log.Error(err, "Failed to list the source consumer groups; retrying next round")
		return
	}
	c.checkHidden(names)
	// Every group's offsets are read (and pinned) before any sync: the first round of
	// an engine reads every sync the topic holds, and the syncs around a later group's
	// position must not be thinned while an earlier group's round reads them.
	c.tr.store.retainPins(names)
	offsets := make(map[string]*sarama.OffsetFetchResponse, len(names))
	for _, g := range names {
		resp, err := c.tr.groupOffsets(g)
		if err != nil {
			c.log.Error(err, "Failed to checkpoint a consumer group; retrying next round", "group", g)
			continue
		}
		offsets[g] = resp
	}
	for _, g := range names {
		resp, ok := offsets[g]
		if !ok {
			continue
		}
		if ctx.Err() != nil {
			return
		}
		gt, err := c.tr.translateOffsets(ctx, g, resp, true)
		if err != nil {
			c.log.Error(err, "Failed to checkpoint a consumer group; retrying next round", "group", g)
			continue
		}
		c.record(gt)
	}
}

func (c *groupCheckpointer) record(gt *GroupTranslation) {
	c.mu.Lock()
	s := c.stats[gt.Group]
	s.Group = gt.Group
	s.PartitionsTranslated = 0
	s.LastCheckpoint = time.Now()
	committed, backwards := 0, 0
	for _, pt := range gt.Partitions {
		if pt.TargetOffset >= 0 {
			s.PartitionsTranslated++
		}
		if pt.Committed && !pt.Renewed {
			committed++
		}
		if pt.Skipped == skipBackwards {
			backwards++
			// Consumers that moved and stopped leave their group further than the
			// translation every round: said once at info, then at debug level.
			log := c.log.V(1)
			if s.SkippedBackwards == 0 {
				log = c.log
			}
			log.Info("Left a target group partition alone: it is further than the translated offset",
				"group", gt.Group, "targetTopic", pt.TargetTopic, "partition", pt.Partition,
				"targetCommitted", pt.TargetCommitted, "translated", pt.TargetOffset, "sourceOffset", pt.SourceOffset)
		}
	}
	s.PartitionsCommitted += int64(committed)
	s.SkippedBackwards += int64(backwards)
	if gt.ActiveMembers > 0 {
		s.SkippedActive++
		if s.SkippedActive == 1 {
			c.log.Info("Left a target group alone: it has active members", "group", gt.Group, "members", gt.ActiveMembers)
		}
	}
	c.stats[gt.Group] = s
	c.mu.Unlock()
	if committed > 0 {
		c.log.V(1).Info("Committed translated offsets to the target group", "group", gt.Group, "partitions", committed)
	}
	c.metrics.observe(gt, committed, backwards)
}

// snapshot returns the groups' stats sorted by name.
func (c *groupCheckpointer) snapshot() []GroupStats {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]GroupStats, 0, len(c.stats))
	for _, s := range c.stats {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out
}

// checkpointMetrics are the per-group checkpoint metrics.
type checkpointMetrics struct {
	translated *prometheus.GaugeVec
	last       *prometheus.GaugeVec
	committed  *prometheus.CounterVec
	backwards  *prometheus.CounterVec
	active     *prometheus.CounterVec
}

func newCheckpointMetrics() *checkpointMetrics {
	return &checkpointMetrics{
		translated: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kafka_mirror_group_partitions_translated",
			Help: "Partitions of a source consumer group whose committed offset was translated in the last checkpoint."}, []string{"group"}),
		last: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "kafka_mirror_group_last_checkpoint_timestamp_seconds",
			Help: "When a source consumer group was last checkpointed (Unix time); its age is time() minus this."}, []string{"group"}),
		committed: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kafka_mirror_group_offsets_committed_total",
			Help: "Translated partition offsets committed to the target group (renewals of an unchanged offset not counted)."}, []string{"group"}),
		backwards: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kafka_mirror_group_offsets_not_moved_back_total",
			Help: "Translated partition offsets not committed because the target group was further already."}, []string{"group"}),
		active: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kafka_mirror_group_checkpoints_skipped_active_total",
			Help: "Checkpoints not committed because the target group had active members."}, []string{"group"}),
	}
}

func (m *checkpointMetrics) register(r prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.translated, m.last, m.committed, m.backwards, m.active} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}

func (m *checkpointMetrics) observe(gt *GroupTranslation, committed, backwards int) {
	n := 0
	for _, pt := range gt.Partitions {
		if pt.TargetOffset >= 0 {
			n++
		}
	}
	m.translated.WithLabelValues(gt.Group).Set(float64(n))
	m.last.WithLabelValues(gt.Group).SetToCurrentTime()
	m.committed.WithLabelValues(gt.Group).Add(float64(committed))
	m.backwards.WithLabelValues(gt.Group).Add(float64(backwards))
	if gt.ActiveMembers > 0 {
		m.active.WithLabelValues(gt.Group).Inc()
	}
}

// newCheckpoints builds the offset sync writer and the group checkpointer of a config
// with groups set, and registers the checkpoint metrics.
func (e *Engine) newCheckpoints(reg prometheus.Registerer) error {
	if err := e.cfg.TranslationRefused(nil); err != nil {
		return err
	}
	m := newCheckpointMetrics()
	if err := m.register(reg); err != nil {
		return fmt.Errorf("while registering checkpoint metrics: %w", err)
	}
	c, err := newGroupCheckpointer(e.cfg, m, e.log)
	if err != nil {
		return err
	}
	e.checkpoints = c
	e.syncs = newOffsetSyncWriter(e.cfg, e.log, &e.parts)
	e.sender.syncs = e.syncs
	return nil
}

// startCheckpoints starts the offset sync writer and the group checkpointer when
// groups is set. stop ends the writer after its last flush; the checkpointer runs on
// bg under ctx.
func (e *Engine) startCheckpoints(ctx context.Context, conns *connections, run func(func() error)) (stop func(deadline time.Time, aborted bool)) {
	if e.syncs == nil {
		return func(time.Time, bool) {}
	}
	stopCh, abortCh := make(chan struct{}), make(chan struct{})
	done := e.syncs.start(e.cfg, e.kafkaOpts, conns.targetAdmin, stopCh, abortCh)
	if e.checkpoints != nil {
		e.checkpoints.tr = newTranslator(e.cfg, e.sel, conns, e.log)
		e.checkpoints.tr.failback = e.failback
		run(func() error { e.checkpoints.run(ctx); return nil })
	}
	var once sync.Once
	return func(deadline time.Time, aborted bool) {
		once.Do(func() {
			if aborted {
				close(abortCh)
			}
			close(stopCh)
			if !waitUntil(deadline, done) {
				e.log.Info("Stopped waiting for the last offset syncs to be written")
			}
		})
	}
}
