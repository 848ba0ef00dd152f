package mirror

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/IBM/sarama"
)

// immediate runs an immediate failover (see the comment at the top of failover.go).
func (f *failover) immediate(ctx context.Context) error {
	var parts []partitionKey
	if f.source != nil {
		n, err := groupMembers(f.source.admin, f.cfg.ConsumerGroup)
		if err != nil {
			return fmt.Errorf("while describing the mirror's consumer group %q on the source cluster: %w", f.cfg.ConsumerGroup, err)
		}
		if n > 0 {
			return fmt.Errorf("the mirror is still running: its consumer group %q has %d members; stop it first (kubectl scale --replicas=0, or SIGTERM to kafka-mirror run; a killed one stays a member until its session times out)",
				f.cfg.ConsumerGroup, n)
		}
		if parts, err = f.sourcePartitions(); err != nil {
			return err
		}
	} else {
		var err error
		if parts, err = f.targetKnownPartitions(ctx); err != nil {
			return err
		}
	}
	f.fillPartitions(ctx, parts, true)
	return f.checkpoint(ctx, false)
}

// targetKnownPartitions lists the selected source partitions the target knows of
// without the source: those the mirror's offset syncs and target-side progress name.
func (f *failover) targetKnownPartitions(ctx context.Context) ([]partitionKey, error) {
	seen := map[partitionKey]bool{}
	if f.cfg.GroupsEnabled() {
		if err := readOffsetSyncs(ctx, f.target.client, f.store, f.log); err != nil {
			return nil, err
		}
		for tp := range f.store.parts {
			seen[tp] = true
		}
	}
	resp, err := listOffsets(f.target.admin, ProgressGroup(f.cfg.ConsumerGroup), nil)
	if err != nil {
		return nil, fmt.Errorf("while reading the mirror's progress group %q on the target cluster: %w", ProgressGroup(f.cfg.ConsumerGroup), err)
	}
	if resp != nil {
		for _, ps := range resp.Blocks {
			for _, b := range ps {
				if tp := progressEntryOf(b.Metadata); tp.topic != "" {
					seen[tp] = true
				}
			}
		}
	}
	parts := make([]partitionKey, 0, len(seen))
	for tp := range seen {
		if f.sel.Matches(tp.topic) {
			parts = append(parts, tp)
		}
	}
	sortKeys(parts)
	if len(parts) == 0 {
		return nil, errors.New("the target holds no progress and no offset sync of this mirror: nothing to fail over (is consumerGroup the mirror's?)")
	}
	return parts, nil
}

// checkpointFromTarget writes the final checkpoints without the source: every target
// group the selection matches whose offsets the mirror checkpointed (CheckpointMetadata
// names the source offset it translated) is translated again through every offset sync
// the mirror wrote, which may now be exact, and committed under the usual guard (no
// members, never backwards). A group the mirror never checkpointed is not known here.
func (f *failover) checkpointFromTarget(ctx context.Context) error {
	names, err := f.selectedGroups(f.target.admin, "target")
	if err != nil {
		return err
	}
	committed := f.mirroredUpTo()
	// Every group's checkpointed source offsets are read, and pinned, before the syncs
	// are read into a store of their own (see checkpoint).
	store := newOffsetSyncStore(f.store.topic)
	checkpointed := map[string][]checkpointedPartition{}
	var errs []error
	for _, g := range names {
		resp, err := listOffsets(f.target.admin, g, nil)
		if err != nil {
			errs = append(errs, fmt.Errorf("while reading the offsets of group %q on the target cluster: %w", g, err))
			continue
		}
		cps := f.checkpointedPartitions(resp)
		pins := make(map[partitionKey]int64, len(cps))
		for _, cp := range cps {
			pins[partitionKey{cp.meta.SourceTopic, cp.partition}] = cp.meta.SourceOffset
		}
		store.pinGroup(g, pins)
		checkpointed[g] = cps
	}
	if err := readOffsetSyncs(ctx, f.target.client, store, f.log); err != nil {
		return errors.Join(append(errs, err)...)
	}
	tr := &translator{cfg: f.cfg, sel: f.sel, targetAdmin: f.target.admin, target: f.target.client, store: store, log: f.log}
	for _, g := range names {
		gt := &GroupTranslation{Group: g}
		targetParts := map[string][]int32{}
		for _, cp := range checkpointed[g] {
			meta, p := cp.meta, cp.partition
			pt := PartitionTranslation{Topic: meta.SourceTopic, Partition: p, TargetTopic: cp.targetTopic, SourceOffset: meta.SourceOffset,
				TargetOffset: -1, TargetCommitted: -1, TargetEnd: -1, Lag: -1}
			if to, exact, ok := store.translate(partitionKey{meta.SourceTopic, p}, cmp.Or(meta.SourceTopicID, store.latestTopicID(partitionKey{meta.SourceTopic, p})), meta.SourceOffset); ok {
				pt.TargetOffset, pt.Exact = to, exact
			}
			gt.Partitions = append(gt.Partitions, pt)
			targetParts[cp.targetTopic] = append(targetParts[cp.targetTopic], p)
		}
		if len(gt.Partitions) == 0 {
			continue
		}
		sortTranslations(gt.Partitions)
		if err := tr.readTargetGroup(gt, targetParts); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := tr.commit(gt); err != nil {
			errs = append(errs, err)
		}
		f.addGroup(gt, committed, "")
	}
	return errors.Join(errs...)
}

// checkpointedPartition is a target group's partition whose offset this mirror
// checkpointed: its metadata names the source offset it translated.
type checkpointedPartition struct {
	targetTopic string
	partition   int32
	meta        CheckpointMetadata
}

// checkpointedPartitions returns the partitions of a target group's offsets (resp)
// that this mirror checkpointed for a selected topic.
func (f *failover) checkpointedPartitions(resp *sarama.OffsetFetchResponse) []checkpointedPartition {
	if resp == nil {
		return nil
	}
	var out []checkpointedPartition
	for topic, ps := range resp.Blocks {
		for p, b := range ps {
			meta, ok := ParseCheckpointMetadata(b.Metadata)
			if !ok || meta.Mirror != f.cfg.ConsumerGroup || !f.sel.Matches(meta.SourceTopic) || f.sel.TargetName(meta.SourceTopic) != topic ||
				!errors.Is(b.Err, sarama.ErrNoError) {
				continue
			}
			out = append(out, checkpointedPartition{targetTopic: topic, partition: p, meta: meta})
		}
	}
	return out
}
