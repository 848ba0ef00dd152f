package mirror

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/go-logr/logr"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/topics"
)

// A failover as one declared step (docs/failover.md): Failover cuts a mirror over to
// its target cluster and reports exactly what it left there.
//
// Planned: the source must answer and the mirror must be stopped (its consumer group
// empty: the operator scales the Deployment to 0 first, a person stops `kafka-mirror
// run`); Failover waits for that within the timeout, so a group whose members are
// still leaving is not an error. It then reads the end offset of every selected source
// partition and runs the engine itself, with the mirror's own config and consumer
// group, until the mirror's commit point of every partition reaches that end; it stops
// the engine (which drains, commits and ends its offset sync chains), reads both ends
// again (the cutover), and writes the final checkpoint of every selected group. A
// source still growing past the timeout fails the operation, naming the partitions
// still behind; so does a group whose committed source offset is past the mirror's
// commit point (it read records the target does not hold), before anything is
// committed.
//
// Immediate: nothing more is mirrored. The source is asked with every wait bounded by
// the timeout; when it does not answer, the report says so and everything is computed
// from what the target holds: the mirror's progress on the target (ProgressGroup), the
// offset syncs, and the checkpoints the engine committed to the target groups, which
// are translated again through the syncs it finally wrote.

// Timeouts of a failover whose options name none: a planned failover as a whole, and
// each wait of an immediate failover for a cluster's answer.
const (
	DefaultPlannedFailoverTimeout   = 5 * time.Minute
	DefaultImmediateFailoverTimeout = 30 * time.Second
)

// failoverPoll is how often a planned failover reads the mirror's commit points and
// the mirror group's members.
const failoverPoll = 200 * time.Millisecond

// maxBehindNamed bounds the partitions an error names.
const maxBehindNamed = 20

// FailoverOptions says how Failover cuts over.
type FailoverOptions struct {
	// Mode is planned or immediate.
	Mode FailoverMode
	// Timeout bounds a planned failover as a whole (waiting for the running mirror to
	// stop, the drain, the checkpoints) and, in an immediate failover, every wait for a
	// cluster's answer. DefaultPlannedFailoverTimeout or DefaultImmediateFailoverTimeout
	// when 0.
	Timeout time.Duration
}

// failover is one run of Failover.
type failover struct {
	cfg      *config.Config
	fo       FailoverOptions
	opts     []Option
	o        options
	log      logr.Logger
	sel      *topics.Selector
	groups   *GroupSelector // nil without groups
	deadline time.Time
	report   *FailoverReport

	source, target *clusterConn // source nil when it did not answer
	store          *offsetSyncStore
}

// clusterConn is a client of one cluster and its admin.
type clusterConn struct {
	client sarama.Client
	admin  sarama.ClusterAdmin
}

func (c *clusterConn) close() {
	if c != nil {
		_ = c.admin.Close()
	}
}

// Failover cuts the mirror of cfg over to its target cluster in fo.Mode (see the
// comment at the top of failover.go) and returns what it did. The report is returned
// also when the failover failed: it holds what was known then and Error says why;
// the error is the same.
func Failover(ctx context.Context, cfg *config.Config, fo FailoverOptions, opts ...Option) (*FailoverReport, error) {
	o := options{log: logr.Discard()}
	for _, opt := range opts {
		opt(&o)
	}
	if fo.Timeout <= 0 {
		fo.Timeout = DefaultPlannedFailoverTimeout
		if fo.Mode == FailoverImmediate {
			fo.Timeout = DefaultImmediateFailoverTimeout
		}
	}
	f := &failover{cfg: cfg, fo: fo, opts: opts, o: o, log: o.log.WithName("failover"),
		report: &FailoverReport{Mode: fo.Mode, Mirror: cfg.ConsumerGroup, StartedAt: time.Now().UTC(), Partitions: []FailoverPartition{}}}
	f.deadline = time.Now().Add(fo.Timeout)
	err := f.run(ctx)
	if err == nil {
		err = f.writeFailbackPoints(ctx)
	}
	f.report.CompletedAt = time.Now().UTC()
	f.source.close()
	f.target.close()
	if err != nil {
		f.report.Error = err.Error()
		f.log.Error(err, "Failed the failover", "mode", string(fo.Mode))
		return f.report, err
	}
	f.report.Completed = true
	f.log.Info("Completed the failover", "mode", string(fo.Mode), "partitions", len(f.report.Partitions), "groups", len(f.report.Groups))
	return f.report, nil
}

func (f *failover) run(ctx context.Context) error {
	if f.fo.Mode != FailoverPlanned && f.fo.Mode != FailoverImmediate {
		return fmt.Errorf("mode: %q is not planned or immediate", f.fo.Mode)
	}
	if err := ValidateConfig(f.cfg); err != nil {
		return err
	}
	sel, err := topics.NewSelector(f.cfg.Topics)
	if err != nil {
		return err
	}
	f.sel = sel
	if f.cfg.GroupsEnabled() {
		if f.groups, err = NewGroupSelector(f.cfg); err != nil {
			return err
		}
	} else {
		f.log.Info("The config does not set groups: no offset syncs tell where the last mirrored records landed, and no group is checkpointed")
	}
	f.store = newOffsetSyncStore(OffsetSyncTopic(f.cfg.ConsumerGroup))
	if f.target, err = f.connect(ctx, kafka.RoleTarget); err != nil {
		return fmt.Errorf("while connecting to the target cluster: %w", err)
	}
	if f.source, err = f.connect(ctx, kafka.RoleSource); err != nil {
		if f.fo.Mode == FailoverPlanned {
			return fmt.Errorf("a planned failover needs the source cluster (use --mode immediate when it is gone): %w", err)
		}
		f.log.Error(err, "Failed to reach the source cluster; reporting from what the target holds")
		f.source = nil
	}
	f.report.SourceReachable = f.source != nil
	if f.fo.Mode == FailoverPlanned {
		return f.planned(ctx)
	}
	return f.immediate(ctx)
}

// connect opens a client of one cluster, waiting for it at most until the deadline
// (planned) or the timeout (immediate). A client that connects later is closed.
func (f *failover) connect(ctx context.Context, role string) (*clusterConn, error) {
	sc, err := kafka.AdminConfig(f.cfg, role, f.o.kafkaOpts...)
	if err != nil {
		return nil, err
	}
	sc.Consumer.Return.Errors = true
	limit := f.fo.Timeout
	if f.fo.Mode == FailoverImmediate {
		// Every request to a cluster that went away ends within the timeout.
		sc.Net.DialTimeout, sc.Net.ReadTimeout, sc.Net.WriteTimeout = limit, limit, limit
		sc.Metadata.Retry.Max = 1
		sc.Admin.Timeout = limit
	}
	cl := f.cfg.Source
	if role == kafka.RoleTarget {
		cl = f.cfg.Target
	}
	type result struct {
		c   *clusterConn
		err error
	}
	done := make(chan result, 1)
	go func() {
		client, err := kafka.NewClientFromConfig(cl, sc, append([]kafka.Option{kafka.WithRole(role)}, f.o.kafkaOpts...)...)
		if err != nil {
			done <- result{err: err}
			return
		}
		admin, err := sarama.NewClusterAdminFromClient(client)
		if err != nil {
			_ = client.Close()
			done <- result{err: fmt.Errorf("while creating the %s cluster admin: %w", role, err)}
			return
		}
		done <- result{c: &clusterConn{client: client, admin: admin}}
	}()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.c, r.err
	case <-timer.C:
	case <-ctx.Done():
	}
	go func() {
		if r := <-done; r.c != nil {
			r.c.close()
		}
	}()
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return nil, fmt.Errorf("the %s cluster did not answer within %v", role, limit)
}

// planned runs a planned failover (see the comment at the top).
func (f *failover) planned(ctx context.Context) error {
	if err := f.waitMirrorStopped(ctx); err != nil {
		return err
	}
	parts, err := f.sourcePartitions()
	if err != nil {
		return err
	}
	ends, err := f.sourceEnds(parts)
	if err != nil {
		return err
	}
	f.log.Info("Draining the mirror up to the source's end", "partitions", len(parts))
	if err := f.drain(ctx, parts, ends); err != nil {
		f.fillPartitions(ctx, parts, true)
		return err
	}
	f.fillPartitions(ctx, parts, true)
	var grew []string
	for _, p := range f.report.Partitions {
		if p.LeftBehind == nil || *p.LeftBehind > 0 {
			grew = append(grew, fmt.Sprintf("%s/%d (%s left behind)", p.Topic, p.Partition, countOrNote(p.LeftBehind, p.LeftBehindNote)))
		}
	}
	if len(grew) > 0 {
		return fmt.Errorf("the source grew while the mirror stopped (producers still writing?), records were left behind on %s", namedList(grew))
	}
	return f.checkpoint(ctx, true)
}

// waitMirrorStopped waits until the mirror's consumer group on the source has no
// members: the engine of a planned failover must be the only one mirroring, or the
// running one would go on after the cutover.
func (f *failover) waitMirrorStopped(ctx context.Context) error {
	logged := false
	for {
		n, err := groupMembers(f.source.admin, f.cfg.ConsumerGroup)
		if err != nil {
			return fmt.Errorf("while describing the mirror's consumer group %q on the source cluster: %w", f.cfg.ConsumerGroup, err)
		}
		if n == 0 {
			return nil
		}
		if !logged {
			f.log.Info("Waiting for the running mirror to stop", "group", f.cfg.ConsumerGroup, "members", n)
			logged = true
		}
		if time.Now().After(f.deadline) {
			return fmt.Errorf("the mirror is still running: its consumer group %q has %d members after %v; stop it first (kubectl scale --replicas=0, or SIGTERM to kafka-mirror run)",
				f.cfg.ConsumerGroup, n, f.fo.Timeout)
		}
		if err := sleepCtx(ctx, failoverPoll); err != nil {
			return err
		}
	}
}

// groupMembers returns the number of members of group.
func groupMembers(admin sarama.ClusterAdmin, group string) (int, error) {
	desc, err := admin.DescribeConsumerGroups([]string{group})
	if err != nil {
		return 0, err
	}
	for _, d := range desc {
		if d.GroupId == group {
			return len(d.Members), nil
		}
	}
	return 0, nil
}

// sourcePartitions lists the selected source partitions, sorted.
func (f *failover) sourcePartitions() ([]partitionKey, error) {
	all, err := f.source.client.Topics()
	if err != nil {
		return nil, fmt.Errorf("while listing the source topics: %w", err)
	}
	var parts []partitionKey
	for _, t := range all {
		if !f.sel.Matches(t) {
			continue
		}
		ps, err := f.source.client.Partitions(t)
		if err != nil {
			return nil, fmt.Errorf("while reading the partitions of source topic %q: %w", t, err)
		}
		for _, p := range ps {
			parts = append(parts, partitionKey{t, p})
		}
	}
	sortKeys(parts)
	return parts, nil
}

func sortKeys(parts []partitionKey) {
	sort.Slice(parts, func(i, j int) bool {
		if parts[i].topic != parts[j].topic {
			return parts[i].topic < parts[j].topic
		}
		return parts[i].partition < parts[j].partition
	})
}

// sourceEnds reads the end offset (high watermark) of every partition.
func (f *failover) sourceEnds(parts []partitionKey) (map[partitionKey]int64, error) {
	ends := make(map[partitionKey]int64, len(parts))
	for _, tp := range parts {
		end, err := f.source.client.GetOffset(tp.topic, tp.partition, sarama.OffsetNewest)
		if err != nil {
			return nil, fmt.Errorf("while reading the end offset of source partition %s/%d: %w", tp.topic, tp.partition, err)
		}
		ends[tp] = end
	}
	return ends, nil
}

// drain runs the engine until the mirror's commit point of every partition reaches
// ends and the source has not grown past them meanwhile, then stops it (it drains and
// commits) and returns Run's error. A source that keeps growing fails at the deadline.
func (f *failover) drain(ctx context.Context, parts []partitionKey, ends map[partitionKey]int64) error {
	ecfg := *f.cfg
	// A failover is a short job next to nothing else: no metrics endpoint to collide
	// with the stopped mirror's.
	ecfg.Metrics.Address = "0"
	if f.cfg.Consumer != nil {
		// A dynamic member, which leaves the group when it stops, whatever the mirror's
		// pods use: the failover is no pod of the mirror and must not fence one.
		c := *f.cfg.Consumer
		c.GroupInstanceID = ""
		ecfg.Consumer = &c
	}
	if f.cfg.Groups != nil {
		// The offset syncs are written as usual, but the groups are checkpointed once,
		// by the failover at the end (after the check that none is ahead of the mirror),
		// not by the engine's periodic round meanwhile.
		g := *f.cfg.Groups
		g.SyncInterval.Duration = f.fo.Timeout + time.Hour
		ecfg.Groups = &g
	}
	e, err := New(&ecfg, f.opts...)
	if err != nil {
		return err
	}
	ectx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- e.Run(ectx) }()
	stopEngine := func() error {
		stop()
		return <-done
	}
	timer := time.NewTimer(time.Until(f.deadline))
	defer timer.Stop()
	tick := time.NewTicker(failoverPoll)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err == nil {
				err = ctx.Err()
			}
			return fmt.Errorf("the mirror stopped before it drained: %w", err)
		case <-timer.C:
			committed, cerr := f.committedOffsets(parts)
			if now, err := f.sourceEnds(parts); err == nil {
				ends = now
			}
			serr := stopEngine()
			if cerr != nil {
				return errors.Join(cerr, serr)
			}
			var behind []string
			for _, tp := range parts {
				if committed[tp] < ends[tp] {
					behind = append(behind, fmt.Sprintf("%s/%d (committed %d of %d)", tp.topic, tp.partition, committed[tp], ends[tp]))
				}
			}
			return errors.Join(fmt.Errorf("the mirror did not reach the source's end within %v (is the source still growing?): %s behind",
				f.fo.Timeout, namedList(behind)), serr)
		case <-tick.C:
			committed, err := f.committedOffsets(parts)
			if err != nil {
				f.log.V(1).Info("Failed to read the mirror's commit points; retrying", "error", err.Error())
				continue
			}
			caughtUp := true
			for _, tp := range parts {
				caughtUp = caughtUp && committed[tp] >= ends[tp]
			}
			if !caughtUp {
				continue
			}
			// Reached the ends read before: stop only if the source has not grown since
			// (a producer still writing); otherwise drain up to the new ends.
			now, err := f.sourceEnds(parts)
			if err != nil {
				f.log.V(1).Info("Failed to read the source's end offsets; retrying", "error", err.Error())
				continue
			}
			grown := false
			for _, tp := range parts {
				grown = grown || now[tp] > ends[tp]
			}
			if grown {
				ends = now
				continue
			}
			f.log.Info("Drained the mirror; stopping it")
			if err := stopEngine(); err != nil {
				return fmt.Errorf("while stopping the drained mirror: %w", err)
			}
			return nil
		}
	}
}

// namedList joins items, naming at most maxBehindNamed.
func namedList(items []string) string {
	if len(items) > maxBehindNamed {
		return strings.Join(items[:maxBehindNamed], ", ") + fmt.Sprintf(" and %d more", len(items)-maxBehindNamed)
	}
	return strings.Join(items, ", ")
}

func countOrNote(n *int64, note string) string {
	if n == nil {
		return note
	}
	return strconv.FormatInt(*n, 10)
}

// committedOffsets returns the mirror's commit point of every partition (-1 when it
// has none): the furthest of the source group's offset and the target-side progress
// (ProgressGroup), which with exactlyOnce is the truth and otherwise follows the
// source group. Without the source, only the target side is read.
func (f *failover) committedOffsets(parts []partitionKey) (map[partitionKey]int64, error) {
	out := make(map[partitionKey]int64, len(parts))
	bySource, byTarget := map[string][]int32{}, map[string][]int32{}
	for _, tp := range parts {
		out[tp] = -1
		bySource[tp.topic] = append(bySource[tp.topic], tp.partition)
		tt := f.sel.TargetName(tp.topic)
		byTarget[tt] = append(byTarget[tt], tp.partition)
	}
	if f.source != nil {
		resp, err := listOffsets(f.source.admin, f.cfg.ConsumerGroup, bySource)
		if err != nil {
			return nil, fmt.Errorf("while reading the offsets of the mirror's group %q on the source cluster: %w", f.cfg.ConsumerGroup, err)
		}
		for _, tp := range parts {
			if b := blockOf(resp, tp.topic, tp.partition); b != nil && errors.Is(b.Err, sarama.ErrNoError) && b.Offset >= 0 {
				out[tp] = b.Offset
			}
		}
	}
	resp, err := listOffsets(f.target.admin, ProgressGroup(f.cfg.ConsumerGroup), byTarget)
	if err != nil {
		return nil, fmt.Errorf("while reading the mirror's progress group %q on the target cluster: %w", ProgressGroup(f.cfg.ConsumerGroup), err)
	}
	for _, tp := range parts {
		if b := blockOf(resp, f.sel.TargetName(tp.topic), tp.partition); b != nil && errors.Is(b.Err, sarama.ErrNoError) && b.Offset >= 0 &&
			progressEntryOf(b.Metadata) == tp {
			out[tp] = max(out[tp], b.Offset)
		}
	}
	return out, nil
}

// progressEntryOf returns the source partition a target-side progress entry names
// (progressMetadata, txnProgressMetadata), or the zero key for other metadata.
func progressEntryOf(meta string) partitionKey {
	meta, _, _ = strings.Cut(meta, topicIDMark)
	for _, prefix := range []string{"kafka-mirror source offset of ", "kafka-mirror exactly-once source offset of "} {
		rest, ok := strings.CutPrefix(meta, prefix)
		if !ok {
			continue
		}
		i := strings.LastIndexByte(rest, '/')
		if i <= 0 {
			return partitionKey{}
		}
		p, err := strconv.ParseInt(rest[i+1:], 10, 32)
		if err != nil {
			return partitionKey{}
		}
		return partitionKey{rest[:i], int32(p)}
	}
	return partitionKey{}
}

// fillPartitions reads, at the cutover, what each partition left on the target and
// puts it in the report.
func (f *failover) fillPartitions(ctx context.Context, parts []partitionKey, sourceAsked bool) {
	now := time.Now().UTC()
	f.report.CutoverAt = &now
	committed, err := f.committedOffsets(parts)
	if err != nil {
		f.log.Error(err, "Failed to read the mirror's commit points")
		committed = map[partitionKey]int64{}
	}
	if f.cfg.GroupsEnabled() {
		if err := readOffsetSyncs(ctx, f.target.client, f.store, f.log); err != nil {
			f.log.Error(err, "Failed to read the offset syncs; the target offsets of the last mirrored records are unknown")
		}
	}
	f.report.Partitions = f.report.Partitions[:0]
	for _, tp := range parts {
		fp := FailoverPartition{Topic: tp.topic, Partition: tp.partition, TargetTopic: f.sel.TargetName(tp.topic),
			Committed: -1, LastMirroredOffset: -1, LastMirroredTargetOffset: -1, TargetEnd: -1}
		if c, ok := committed[tp]; ok {
			fp.Committed = c
		}
		if end, err := f.target.client.GetOffset(fp.TargetTopic, tp.partition, sarama.OffsetNewest); err == nil {
			fp.TargetEnd = end
		} else {
			f.log.Error(err, "Failed to read the end offset of a target partition", "topic", fp.TargetTopic, "partition", tp.partition)
		}
		upTo := f.lastMirrored(tp, &fp)
		switch {
		case f.source == nil:
			fp.LeftBehindNote = UnknownSourceUnreachable
		case !sourceAsked:
		default:
			end, err := f.source.client.GetOffset(tp.topic, tp.partition, sarama.OffsetNewest)
			if err != nil {
				fp.LeftBehindNote = "unknown: " + err.Error()
				break
			}
			fp.SourceEnd = &end
			left := max(end-upTo, 0)
			fp.LeftBehind = &left
			if fp.LastMirroredNote != "" && left > 0 {
				fp.LeftBehindNote = "at most: " + fp.LastMirroredNote
			}
		}
		f.report.Partitions = append(f.report.Partitions, fp)
	}
}

// lastMirrored fills in the last source record known to be on the target and returns
// the source offset up to which (exclusive) the partition is on the target.
func (f *failover) lastMirrored(tp partitionKey, fp *FailoverPartition) int64 {
	upTo := max(fp.Committed, 0)
	src, tgt, ended, ok := f.store.lastCopy(tp)
	switch {
	case ok && src+1 >= upTo:
		fp.LastMirroredOffset, fp.LastMirroredTargetOffset = src, tgt
		upTo = src + 1
		if !ended && fp.TargetEnd > tgt+1 {
			fp.LastMirroredNote = "the mirror did not stop cleanly: the target may hold later records without an offset sync"
		}
	case fp.Committed > 0:
		fp.LastMirroredOffset = fp.Committed - 1
		if t, exact, ok := f.store.translate(tp, f.store.latestTopicID(tp), fp.Committed-1); ok && exact {
			fp.LastMirroredTargetOffset = t
		} else {
			fp.LastMirroredNote = UnknownNoOffsetSync
		}
	}
	return upTo
}

// lastCopy returns the highest source offset of tp that an offset sync says is on the
// target, where its latest copy landed, and whether that copy's chain ended (its
// assignment stopped cleanly after it).
func (st *offsetSyncStore) lastCopy(tp partitionKey) (source, target int64, ended, ok bool) {
	sp := st.translatable(tp, st.latestTopicID(tp))
	if sp == nil {
		return 0, 0, false, false
	}
	for _, ch := range sp.chains {
		l := ch.last()
		if !ok || l.SourceOffset > source || (l.SourceOffset == source && l.TargetOffset > target) {
			source, target, ended, ok = l.SourceOffset, l.TargetOffset, ch.ended, true
		}
	}
	return source, target, ended, ok
}

// checkpoint writes the final checkpoint of every selected group. A planned failover
// refuses to commit anything when a group is ahead of the mirror.
func (f *failover) checkpoint(ctx context.Context, planned bool) error {
	if f.groups == nil {
		return nil
	}
	if f.source == nil {
		return f.checkpointFromTarget(ctx)
	}
	names, err := f.selectedGroups(f.source.admin, "source")
	if err != nil {
		return err
	}
	committed := f.mirroredUpTo()
	// The syncs are read again into a store that pins every group's offsets first
	// (offsetSyncStore.pinGroup): the store read for the report thinned the syncs
	// around old group positions once a partition held more than it keeps.
	tr := &translator{cfg: f.cfg, sel: f.sel, sourceAdmin: f.source.admin, targetAdmin: f.target.admin,
		target: f.target.client, store: newOffsetSyncStore(f.store.topic), log: f.log}
	offsets := make(map[string]*sarama.OffsetFetchResponse, len(names))
	for _, g := range names {
		if offsets[g], err = tr.groupOffsets(g); err != nil {
			return err
		}
	}
	var translations []*GroupTranslation
	var ahead []string
	for _, g := range names {
		gt, err := tr.translateOffsets(ctx, g, offsets[g], false)
		if err != nil {
			return err
		}
		for _, pt := range gt.Partitions {
			if c, ok := committed[partitionKey{pt.Topic, pt.Partition}]; ok && pt.SourceOffset > c {
				ahead = append(ahead, fmt.Sprintf("group %q on %s/%d (committed %d, mirrored up to %d)", g, pt.Topic, pt.Partition, pt.SourceOffset, c))
			}
		}
		translations = append(translations, gt)
	}
	if planned && len(ahead) > 0 {
		for _, gt := range translations {
			f.addGroup(gt, committed, "not committed: a group is ahead of the mirror")
		}
		return fmt.Errorf("refused to complete the planned failover: not mirrored that far yet for %s; its consumers read records the target does not hold", namedList(ahead))
	}
	var errs []error
	for _, gt := range translations {
		if err := tr.commit(gt); err != nil {
			errs = append(errs, err)
		}
		f.addGroup(gt, committed, "")
	}
	return errors.Join(errs...)
}

// selectedGroups lists the consumer groups of one cluster (named by cluster in the
// error) that the config's groups select, sorted.
func (f *failover) selectedGroups(admin sarama.ClusterAdmin, cluster string) ([]string, error) {
	names, err := listSelectedGroups(admin, f.groups)
	if err != nil {
		return nil, fmt.Errorf("while listing the %s consumer groups: %w", cluster, err)
	}
	return names, nil
}

// mirroredUpTo returns, per reported partition, the source offset up to which
// (exclusive) the mirror is known to have copied it: a group committed past it is
// ahead of the mirror.
func (f *failover) mirroredUpTo() map[partitionKey]int64 {
	committed := make(map[partitionKey]int64, len(f.report.Partitions))
	for _, p := range f.report.Partitions {
		committed[partitionKey{p.Topic, p.Partition}] = max(p.Committed, p.LastMirroredOffset+1)
	}
	return committed
}

// addGroup puts gt in the report; refused, when not empty, is the result of every
// partition (nothing was committed).
func (f *failover) addGroup(gt *GroupTranslation, committed map[partitionKey]int64, refused string) {
	fg := FailoverGroup{Group: gt.Group, ActiveMembers: gt.ActiveMembers, Partitions: []FailoverGroupPartition{}}
	for _, pt := range gt.Partitions {
		gp := FailoverGroupPartition{Topic: pt.Topic, Partition: pt.Partition, TargetTopic: pt.TargetTopic,
			SourceOffset: pt.SourceOffset, TargetOffset: pt.TargetOffset, Exact: pt.Exact, Committed: pt.Committed}
		if c, ok := committed[partitionKey{pt.Topic, pt.Partition}]; ok && pt.SourceOffset > c {
			gp.AheadOfMirror, gp.Exact = true, false
		}
		switch {
		case refused != "":
			gp.Result = refused
		case pt.Renewed:
			gp.Result = "unchanged"
		case pt.Committed:
			gp.Result = "committed"
		default:
			gp.Result = "skipped: " + pt.Skipped
		}
		fg.Partitions = append(fg.Partitions, gp)
	}
	f.report.Groups = append(f.report.Groups, fg)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// latestTopicID is the topic ID of tp's offset syncs written last ("" when they name
// none): the incarnation of the topic a failover reports on, the one mirrored last.
func (st *offsetSyncStore) latestTopicID(tp partitionKey) string {
	id, best := "", int64(-1)
	for k, sp := range st.parts[tp] {
		for _, ch := range sp.chains {
			if t := ch.last().TargetOffset; t > best {
				id, best = k, t
			}
		}
	}
	return id
}
