package demo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/audit"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror"
)

// The failover scene: an application group reads part of orders.eu on the source and
// commits; the mirror (config groups) translates its offsets to the target; at the end
// the application moves to the target and must read every record after its source
// position.
const (
	appGroup = "orders-app"
	appTopic = topicEU
	// groupSyncInterval is the demo mirror's groups.syncInterval.
	groupSyncInterval = 2 * time.Second
	// checkpointWait bounds the wait for the engine's checkpoint of the group.
	checkpointWait = time.Minute
)

// FailoverResult is what the failover scene found.
type FailoverResult struct {
	// SourceOffsets is the application group's committed offsets on the source.
	SourceOffsets map[int32]int64
	// TargetOffsets is what the mirror committed to the group on the target.
	TargetOffsets map[int32]int64
	// Expected counts the records after the source position that the filter keeps.
	Expected int
	// Read counts the records the moved group read on the target.
	Read int
	// Skipped counts expected records the moved group never read (must be 0).
	Skipped int
	// Repeated counts records before the source position that the moved group read again.
	Repeated int
	// Copies counts extra copies read (the mirror's duplicates after a kill -9).
	Copies int
}

// appReadsAndMirrorTranslates lets the application group read half of appTopic on the
// source and commit, then waits until the running mirror committed the translated
// offsets to the group on the target.
func (d *demo) appReadsAndMirrorTranslates(ctx context.Context) error {
	total := 0
	for _, r := range d.produced.Records {
		if r.Topic == appTopic {
			total++
		}
	}
	client, err := kgo.NewClient(kgo.SeedBrokers(d.srcBrokers...), kgo.ConsumerGroup(appGroup), kgo.ConsumeTopics(appTopic),
		kgo.DisableAutoCommit(), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return err
	}
	read := 0
	for read < total/2 {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := client.PollRecords(pctx, 50)
		cancel()
		if ctx.Err() != nil {
			client.Close()
			return ctx.Err()
		}
		read += len(fs.Records())
	}
	err = client.CommitUncommittedOffsets(ctx)
	client.Close()
	if err != nil {
		return fmt.Errorf("while committing group %q on the source: %w", appGroup, err)
	}
	d.view.event("Application group %s read %s of %s records of %s on the source, committed and stopped; the mirror translates its offsets to the target every %s.",
		appGroup, count(int64(read)), count(int64(total)), appTopic, groupSyncInterval)

	cfg := d.mirrorConfig()
	deadline := time.Now().Add(checkpointWait)
	for {
		tr, err := mirror.TranslateGroup(ctx, cfg, appGroup, false)
		if err == nil && checkpointed(tr) {
			f := &FailoverResult{SourceOffsets: map[int32]int64{}, TargetOffsets: map[int32]int64{}}
			for _, pt := range tr.Partitions {
				f.SourceOffsets[pt.Partition], f.TargetOffsets[pt.Partition] = pt.SourceOffset, pt.TargetCommitted
			}
			d.result.Failover = f
			d.view.event("The mirror committed group %s's translated offsets to the target (%d partitions), where the group has no members yet.",
				appGroup, len(tr.Partitions))
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the mirror did not commit group %q's translated offsets to the target within %v (last look: %v)", appGroup, checkpointWait, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(groupSyncInterval / 2):
		}
	}
}

// checkpointed reports whether the target group holds the translation of every
// partition the source group committed.
func checkpointed(tr *mirror.GroupTranslation) bool {
	if len(tr.Partitions) == 0 {
		return false
	}
	for _, pt := range tr.Partitions {
		if pt.TargetOffset < 0 || pt.TargetOffset != pt.TargetCommitted {
			return false
		}
	}
	return true
}

// appMovesToTarget starts the application group on the target, where it resumes from
// the translated offsets, reads to the end and compares with the source.
func (d *demo) appMovesToTarget(ctx context.Context) error {
	f := d.result.Failover
	if f == nil {
		return errors.New("the failover scene has no translated offsets")
	}
	ends, err := partitionEnds(d.observer.target, appTopic)
	if err != nil {
		return fmt.Errorf("while reading the ends of target topic %q: %w", appTopic, err)
	}
	// read_committed, as a consumer of an exactly-once mirror reads; the transaction
	// markers such a mirror writes are kept (not counted) so the read reaches the end.
	client, err := kgo.NewClient(kgo.SeedBrokers(d.dstBrokers...), kgo.ConsumerGroup(appGroup), kgo.ConsumeTopics(appTopic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		return err
	}
	defer client.Close()
	pos := map[int32]int64{}
	for p := range ends {
		pos[p] = f.TargetOffsets[p]
	}
	done := func() bool {
		for p, end := range ends {
			if pos[p] < end {
				return false
			}
		}
		return true
	}
	seen := map[string]int{}
	deadline := time.Now().Add(time.Minute)
	for !done() {
		if time.Now().After(deadline) {
			return fmt.Errorf("the moved group read %s up to %v in a minute, the target ends at %v", appTopic, pos, ends)
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := client.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fs.EachRecord(func(r *kgo.Record) {
			pos[r.Partition] = r.Offset + 1
			if r.Attrs.IsControl() {
				return
			}
			for _, h := range r.Headers {
				if h.Key == audit.HeaderID {
					seen[string(h.Value)]++
				}
			}
			f.Read++
		})
	}
	for _, r := range d.produced.Records {
		if r.Topic != appTopic {
			continue
		}
		n := seen[r.ID]
		if n > 1 {
			f.Copies += n - 1
		}
		if r.Offset < f.SourceOffsets[r.Partition] {
			if n > 0 {
				f.Repeated++
			}
			continue
		}
		if !r.Skip {
			f.Expected++
			if n == 0 {
				f.Skipped++
			}
		}
	}
	d.view.event("Application group %s moved to the target: it read %s records from the translated offsets.", appGroup, count(int64(f.Read)))
	return nil
}
