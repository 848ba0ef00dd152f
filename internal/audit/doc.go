// Package audit proves that a mirror lost nothing: it writes a workload of uniquely
// identified records to a source cluster and remembers every record the source
// acknowledged, reads back everything a target cluster holds, and compares the two.
//
// The three steps are independent so that a test can put faults between them:
//
//	produced, err := audit.Produce(ctx, sourceBrokers, audit.Workload{
//		Topics: map[string]int32{"orders": 8}, Records: 200_000, SkipFraction: 0.01,
//	}, nil)
//	// ... run the mirror, kill it, restart it ...
//	opts := audit.Options{Filtered: audit.SkipHeaderFiltered}
//	mirrored, report, err := audit.ReadUntilComplete(ctx, targetBrokers, produced, opts)
//	if !report.OK() { t.Fatal(report) }
//
// ReadAll reads the target once, up to its end offsets (or until MinRecords arrived);
// Reader reads it incrementally; ReadUntilComplete polls until nothing is missing.
// Audit itself is a pure function of what was produced and what was read.
//
// Every record carries the header HeaderID ("km-id") with the value
// "<topic>/<partition>/<run>.<seq>", where seq counts the records written to that source
// partition by one Produce call, and the value starts with the same id (tombstones carry
// it only in the header). Records are keyed (Workload.Keys distinct keys), carry a
// second header HeaderOrigin, and a SkipFraction of them carries HeaderSkip for a filter
// such as `!('skip' in record.headers)` to drop. Workload.TransactionSize writes through
// a transactional producer and aborts an AbortFraction of the transactions; only
// committed records count as produced.
//
// Audit counts, per source partition: produced (acked by the source), mirrored
// (distinct ids found on the target), filtered (expected to be dropped by the filter
// predicate), lost (acked, not filtered, not on the target), duplicated (copies beyond
// the first), out of order (a first copy that arrived after a first copy of a later
// source offset in the same target partition), wrong partition (target topic or
// partition differs from the expected one), altered (key, value, headers or timestamp
// changed, by Digest) and leaked (expected to be filtered yet found on the target).
// Target records whose id the source never acknowledged are counted as unknown, and
// records of aborted source transactions that reached the target as aborted.
// Report.OK is true when nothing was lost, altered, misplaced, reordered or leaked;
// duplicates are allowed (at-least-once) and a caller checks its own bound.
//
// The package uses franz-go's kgo client: it is test tooling, not the engine, and an
// independent client makes the audit a second opinion rather than the engine checking
// itself.
package audit
