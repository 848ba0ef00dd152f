package mirror

// Stats is a snapshot of the engine's progress, for the demo's progress view, the
// periodic progress log and tests. Totals add up the partitions.
type Stats struct {
	// Records is the number of records the target acknowledged.
	Records int64
	// Bytes is the key and value bytes of those records.
	Bytes int64
	// Filtered is the number of source records the handler chain dropped.
	Filtered int64
	// Skipped is the number of source records dropped under `onError: skip`.
	Skipped int64
	// InFlight is the number of source records read and not yet fully acked.
	InFlight int64
	// InFlightBytes is the part of the byte budget (maxInFlightBytes) in use now: the
	// bytes of the records handed to the producer and not yet acked.
	InFlightBytes int64
	// InFlightBytesPeak is the most InFlightBytes has ever been.
	InFlightBytesPeak int64
	// MaxInFlightBytes is the byte budget (maxInFlightBytes, or its default).
	MaxInFlightBytes int64
	// InFlightRecordsPeak is the most records the process ever held handed to the
	// producer and not yet acked, all partitions together.
	InFlightRecordsPeak int64
	// MaxInFlightRecords is the process-wide bound on those records (see
	// InFlightRecordsBound).
	MaxInFlightRecords int64
	// Lag is the sum of the assigned partitions' lag.
	Lag int64
	// Commits counts offset commits the source group coordinator confirmed (for at
	// least one partition).
	Commits int64
	// Rebalances counts consumer-group sessions started by this process's streams.
	Rebalances int64
	// SendErrors counts records whose send finally failed (the first one stops the engine).
	SendErrors int64
	// ResumedFromTarget counts partition assignments that started from the target-side
	// progress because the source group had no offset (expired or deleted).
	ResumedFromTarget int64
	// Recreated counts partition assignments that found their source topic deleted and
	// created again (a new topic ID) and started at the new topic's beginning.
	Recreated int64
	// LoopDropped counts source records that loop prevention (provenance) dropped:
	// LoopFromTarget plus LoopOverHops of the partitions.
	LoopDropped int64
	// Ready is what /readyz answers (see Engine.Ready).
	Ready bool
	// Partitions holds one entry per source partition this process has owned, sorted by
	// topic and partition.
	Partitions []PartitionStats
	// Groups holds one entry per source consumer group checkpointed (groups), sorted by name.
	Groups []GroupStats
	// OffsetSyncs counts offset syncs handed to the target; OffsetSyncsDropped those
	// dropped because the writer was behind (translation falls back to the safe side).
	OffsetSyncs, OffsetSyncsDropped int64
}

// PartitionStats is one source partition's progress.
type PartitionStats struct {
	// Topic and Partition name the source partition.
	Topic     string
	Partition int32
	// Records, Bytes, Filtered and Skipped count as in Stats.
	Records, Bytes, Filtered, Skipped int64
	// InFlight is the number of records read and not yet fully acked (0 when not assigned).
	InFlight int64
	// Committed is the group's committed offset (the next offset to read): the last one
	// the group coordinator confirmed to this process since the partition was last
	// assigned, or the one found at that assignment; -1 when neither is known.
	Committed int64
	// Consumed is the next offset the current (or last) assignment reads: the last
	// offset read + 1, or where the assignment started when it has read nothing yet; -1
	// when unknown. Consumed - Committed bounds the records that a crash would mirror twice.
	Consumed int64
	// HighWatermark is the source partition's high watermark as last fetched, or -1.
	HighWatermark int64
	// Lag is HighWatermark - Committed (0 when either is unknown).
	Lag int64
	// Assigned reports whether this process currently owns the partition.
	Assigned bool
	// WaitingForTarget reports whether the partition waits for its target topic to
	// exist or to have enough partitions.
	WaitingForTarget bool
	// ResumedFromTarget counts the assignments of this partition that started from the
	// target-side progress.
	ResumedFromTarget int64
	// Recreated counts the assignments of this partition that found its topic deleted
	// and created again (a new topic ID) and started at the new topic's beginning.
	Recreated int64
	// LoopFromTarget counts records dropped because their provenance named the target
	// cluster; LoopOverHops those dropped because they had provenance.maxHops hops.
	LoopFromTarget, LoopOverHops int64
}

// Stats returns a snapshot of the engine's progress. It is safe to call at any time,
// also before and after Run.
func (e *Engine) Stats() Stats {
	s := Stats{
		Commits:    e.commits.Load(),
		Rebalances: e.rebalances.Load(),
		SendErrors: e.sender.sendErrors.Load(),
		Ready:      e.Ready() == nil,
	}
	s.InFlightBytes, s.InFlightBytesPeak = e.sender.budget.usage()
	s.MaxInFlightBytes = e.sender.budget.limit
	_, s.InFlightRecordsPeak = e.sender.records.usage()
	s.MaxInFlightRecords = e.sender.records.limit
	s.Groups = e.checkpoints.snapshot()
	if e.syncs != nil {
		s.OffsetSyncs, s.OffsetSyncsDropped = e.syncs.written.Load(), e.syncs.dropped.Load()
	}
	for _, p := range e.parts.all() {
		ps := p.snapshot()
		s.Records += ps.Records
		s.Bytes += ps.Bytes
		s.Filtered += ps.Filtered
		s.Skipped += ps.Skipped
		s.InFlight += ps.InFlight
		s.ResumedFromTarget += ps.ResumedFromTarget
		s.Recreated += ps.Recreated
		s.LoopDropped += ps.LoopFromTarget + ps.LoopOverHops
		if ps.Assigned {
			s.Lag += ps.Lag
		}
		s.Partitions = append(s.Partitions, ps)
	}
	return s
}
