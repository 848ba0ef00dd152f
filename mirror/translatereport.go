package mirror

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/IBM/sarama"
)

// What `offsets translate` says besides the translations: every partition of the
// mirrored topics, those the source group never committed included (with what the
// target group does there), and, per translated partition, how far the mirror got, so
// that a group ahead of the mirror is said to be so rather than look caught up. The
// engine's checkpoints do not need it: a group ahead of a running mirror is the normal
// case there, and committing the translation (where its next record will land) never
// skips a record.

// report lists in gt the partitions of the mirrored topics that the source group never
// committed, then marks the translated partitions the mirror has not mirrored as far as
// the group's offset (markUnmirrored).
func (tr *translator) report(ctx context.Context, gt *GroupTranslation, source sarama.Client) error {
	if err := tr.addUncommitted(gt, source); err != nil {
		return err
	}
	return tr.markUnmirrored(ctx, gt)
}

// addUncommitted fills gt.Uncommitted: every partition of a mirrored source topic that
// gt.Partitions has none of (the source group has no committed offset there), with the
// target partition's log start and end offsets and the target group's committed
// offset. The topics come from source's metadata (Describe only, as the mirror needs).
// With no translated partition the target group's members were not read: they are
// read here.
func (tr *translator) addUncommitted(gt *GroupTranslation, source sarama.Client) error {
	if err := source.RefreshMetadata(); err != nil {
		return fmt.Errorf("while reading the topics of the source cluster: %w", err)
	}
	topics, err := source.Topics()
	if err != nil {
		return fmt.Errorf("while reading the topics of the source cluster: %w", err)
	}
	have := make(map[partitionKey]bool, len(gt.Partitions))
	for _, pt := range gt.Partitions {
		have[partitionKey{pt.Topic, pt.Partition}] = true
	}
	targetParts := map[string][]int32{}
	for _, topic := range topics {
		if !tr.sel.Matches(topic) {
			continue
		}
		parts, err := source.Partitions(topic)
		if err != nil {
			return fmt.Errorf("while reading the partitions of source topic %q: %w", topic, err)
		}
		for _, p := range parts {
			if have[partitionKey{topic, p}] {
				continue
			}
			pt := PartitionTranslation{Topic: topic, Partition: p, TargetTopic: tr.sel.TargetName(topic),
				SourceOffset: -1, TargetOffset: -1, TargetCommitted: -1, TargetEnd: -1, Lag: -1, MirroredTo: -1, TargetStart: -1}
			if end, err := tr.target.GetOffset(pt.TargetTopic, p, sarama.OffsetNewest); err == nil {
				pt.TargetEnd = end
			}
			if start, err := tr.target.GetOffset(pt.TargetTopic, p, sarama.OffsetOldest); err == nil {
				pt.TargetStart = start
			}
			gt.Uncommitted = append(gt.Uncommitted, pt)
			targetParts[pt.TargetTopic] = append(targetParts[pt.TargetTopic], p)
		}
	}
	if len(gt.Uncommitted) == 0 {
		return nil
	}
	sort.Slice(gt.Uncommitted, func(i, j int) bool {
		a, b := gt.Uncommitted[i], gt.Uncommitted[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		return a.Partition < b.Partition
	})
	if len(gt.Partitions) == 0 {
		if err := tr.readTargetGroup(gt, targetParts); err != nil {
			return err
		}
	}
	resp, err := listOffsets(tr.targetAdmin, gt.Group, targetParts)
	if err != nil {
		return fmt.Errorf("while reading the offsets of group %q on the target cluster: %w", gt.Group, err)
	}
	for i := range gt.Uncommitted {
		pt := &gt.Uncommitted[i]
		if b := blockOf(resp, pt.TargetTopic, pt.Partition); b != nil && errors.Is(b.Err, sarama.ErrNoError) && b.Offset >= 0 {
			pt.TargetCommitted = b.Offset
		}
	}
	return nil
}

// markUnmirrored sets MirroredTo of every translated partition to the mirror's stored
// commit point, the highest of the source group's offset (cfg.consumerGroup) and the
// target-side progress (ProgressGroup: the truth with delivery exactlyOnce), positions
// of another incarnation of the topic left out; and marks the partitions whose source
// group offset is past it (AheadOfMirror), which are not exact either: the records
// between are copied after TargetOffset later, and a consumer moved now reads them
// again. A target-side group that cannot be read leaves the source group's offset.
func (tr *translator) markUnmirrored(ctx context.Context, gt *GroupTranslation) error {
	sourceParts, targetParts := map[string][]int32{}, map[string][]int32{}
	var topics []string
	for _, pt := range gt.Partitions {
		if len(sourceParts[pt.Topic]) == 0 {
			topics = append(topics, pt.Topic)
		}
		sourceParts[pt.Topic] = append(sourceParts[pt.Topic], pt.Partition)
		targetParts[pt.TargetTopic] = append(targetParts[pt.TargetTopic], pt.Partition)
	}
	if len(topics) == 0 {
		return nil
	}
	ids, err := sourceTopicIDs(ctx, tr.sourceAdmin, topics)
	if err != nil {
		tr.log.V(1).Info("Judged the mirror's positions without topic IDs", "reason", err.Error())
		ids = map[string]string{}
	}
	src, err := listOffsets(tr.sourceAdmin, tr.cfg.ConsumerGroup, sourceParts)
	if err != nil {
		return fmt.Errorf("while reading the offsets of the mirror's group %q on the source cluster: %w", tr.cfg.ConsumerGroup, err)
	}
	progress := ProgressGroup(tr.cfg.ConsumerGroup)
	tgt, err := listOffsets(tr.targetAdmin, progress, targetParts)
	if err != nil {
		tr.log.V(1).Info("Read the mirror's progress from the source group only", "progressGroup", progress, "reason", err.Error())
		tgt = nil
	}
	for i := range gt.Partitions {
		pt := &gt.Partitions[i]
		id := ids[pt.Topic]
		if b := blockOf(src, pt.Topic, pt.Partition); b != nil && errors.Is(b.Err, sarama.ErrNoError) && b.Offset >= 0 {
			// Any source group offset is a position (a reset by hand too), unless it
			// names another incarnation of the topic.
			if v, _ := judgeEntry(b.Metadata, sourceCommitMetadata, id); v != entryOtherIncarnation {
				pt.MirroredTo = b.Offset
			}
		}
		if b := blockOf(tgt, pt.TargetTopic, pt.Partition); b != nil && errors.Is(b.Err, sarama.ErrNoError) && b.Offset >= 0 {
			txn, _ := judgeEntry(b.Metadata, txnProgressMetadata(pt.Topic, pt.Partition), id)
			backup, _ := judgeEntry(b.Metadata, progressMetadata(pt.Topic, pt.Partition), id)
			if txn.usable() || backup.usable() {
				pt.MirroredTo = max(pt.MirroredTo, b.Offset)
			}
		}
		if pt.MirroredTo >= 0 && pt.SourceOffset > pt.MirroredTo {
			pt.AheadOfMirror, pt.Exact = true, false
		}
	}
	return nil
}

// Unmirrored returns the partitions of gt that the source group committed past what
// the mirror mirrored (AheadOfMirror): translate --commit leaves them alone, and a
// failover that moves the group must not complete while there are any.
func (gt *GroupTranslation) Unmirrored() []PartitionTranslation {
	var out []PartitionTranslation
	for _, pt := range gt.Partitions {
		if pt.AheadOfMirror {
			out = append(out, pt)
		}
	}
	return out
}
