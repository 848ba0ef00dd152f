package audit

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
)

// Options says what Audit expects of the mirror.
type Options struct {
	// Filtered reports whether the mirror's filter is expected to drop a record. nil
	// expects every record on the target.
	Filtered func(ProducedRecord) bool
	// TargetTopic maps a source topic to its target topic. nil means the same name.
	TargetTopic func(string) string
	// AnyPartition turns off the check that source partition p lands in target
	// partition p (for hash or round-robin partitioning).
	AnyPartition bool
	// IgnoreContent turns off the check that key, value, headers and timestamp arrive
	// unchanged (for a mirror with a transform).
	IgnoreContent bool
	// MaxMissing is how many missing ids the report lists. Default 10.
	MaxMissing int
}

// SkipHeaderFiltered is a Filtered predicate for a filter that drops records carrying
// the HeaderSkip header, such as the CEL filter `!('skip' in record.headers)`.
func SkipHeaderFiltered(r ProducedRecord) bool { return r.Skip }

func (o Options) targetTopic(t string) string {
	if o.TargetTopic == nil {
		return t
	}
	return o.TargetTopic(t)
}

// PartitionReport holds the counts of one source partition, or the totals.
type PartitionReport struct {
	// Topic and Partition name the source partition; Topic is "total" for the totals.
	Topic     string
	Partition int32
	// Produced counts records the source acknowledged.
	Produced int
	// Mirrored counts distinct produced records found on the target.
	Mirrored int
	// Filtered counts records the filter was expected to drop.
	Filtered int
	// Lost counts records acknowledged, not filtered and not on the target.
	Lost int
	// Duplicated counts copies on the target beyond the first of each record.
	Duplicated int
	// OutOfOrder counts first copies that arrived, in their target partition, after
	// the first copy of a record with a higher source offset.
	OutOfOrder int
	// WrongPartition counts records whose first copy is not in the expected target
	// topic and partition.
	WrongPartition int
	// Altered counts records whose first copy differs in key, value, headers or
	// timestamp.
	Altered int
	// Leaked counts records expected to be filtered yet found on the target.
	Leaked int
}

// Report is the result of Audit.
type Report struct {
	// Partitions holds one entry per source partition, sorted by topic and partition.
	Partitions []PartitionReport
	// Total sums every partition.
	Total PartitionReport
	// Target counts the records read from the target, copies included.
	Target int
	// Unknown counts target records whose id the source never acknowledged (no id,
	// a foreign id, or a produce that failed on the client yet reached the source).
	Unknown int
	// Aborted counts target records written in an aborted source transaction.
	Aborted int
	// FirstMissing lists the first lost ids, in source order.
	FirstMissing []string
}

// OK reports whether the mirror kept its promise: nothing lost, nothing altered, no
// record in the wrong partition or out of order, no filtered or aborted record on the
// target. Duplicates are allowed (at-least-once); check Total.Duplicated for a bound.
func (r Report) OK() bool {
	t := r.Total
	return t.Lost == 0 && t.OutOfOrder == 0 && t.WrongPartition == 0 && t.Altered == 0 &&
		t.Leaked == 0 && r.Aborted == 0
}

// copyInfo is what Audit needs about one produced record while scanning the target.
type copyInfo struct {
	rec    *ProducedRecord
	part   *PartitionReport
	copies int
}

// Audit compares what the source acknowledged with what the target holds.
func Audit(p *Produced, m *Mirrored, opts Options) Report {
	if opts.MaxMissing <= 0 {
		opts.MaxMissing = 10
	}
	rep := Report{Total: PartitionReport{Topic: "total", Partition: -1}}
	byID := make(map[string]*copyInfo, len(p.Records))
	partIdx := map[topicPartition]int{}
	for i := range p.Records {
		pr := &p.Records[i]
		tp := topicPartition{pr.Topic, pr.Partition}
		k, ok := partIdx[tp]
		if !ok {
			k = len(rep.Partitions)
			partIdx[tp] = k
			rep.Partitions = append(rep.Partitions, PartitionReport{Topic: pr.Topic, Partition: pr.Partition})
		}
		rep.Partitions[k].Produced++
		byID[pr.ID] = &copyInfo{rec: pr}
	}
	// Pointers into rep.Partitions are taken only now that it has stopped growing.
	for i := range p.Records {
		pr := &p.Records[i]
		byID[pr.ID].part = &rep.Partitions[partIdx[topicPartition{pr.Topic, pr.Partition}]]
	}
	aborted := make(map[string]bool, len(p.Aborted))
	for _, id := range p.Aborted {
		aborted[id] = true
	}

	target := slices.Clone(m.Records)
	slices.SortStableFunc(target, func(a, b MirroredRecord) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	})
	rep.Target = len(target)
	// highest source offset seen so far per (source partition, target partition)
	type route struct {
		src, dst topicPartition
	}
	highest := map[route]int64{}
	for _, mr := range target {
		ci := byID[mr.ID]
		if ci == nil {
			if aborted[mr.ID] {
				rep.Aborted++
			} else {
				rep.Unknown++
			}
			continue
		}
		ci.copies++
		pr, part := ci.rec, ci.part
		if ci.copies > 1 {
			part.Duplicated++
			continue
		}
		part.Mirrored++
		if opts.Filtered != nil && opts.Filtered(*pr) {
			// A record that should not be there has no place in the order either.
			part.Leaked++
			continue
		}
		if mr.Topic != opts.targetTopic(pr.Topic) || (!opts.AnyPartition && mr.Partition != pr.Partition) {
			part.WrongPartition++
		}
		if !opts.IgnoreContent && mr.Digest != pr.Digest {
			part.Altered++
		}
		rt := route{topicPartition{pr.Topic, pr.Partition}, topicPartition{mr.Topic, mr.Partition}}
		if h, ok := highest[rt]; ok && pr.Offset < h {
			part.OutOfOrder++
		} else {
			highest[rt] = pr.Offset
		}
	}

	for i := range p.Records {
		pr := &p.Records[i]
		ci := byID[pr.ID]
		if opts.Filtered != nil && opts.Filtered(*pr) {
			ci.part.Filtered++
			continue
		}
		if ci.copies == 0 {
			ci.part.Lost++
			if len(rep.FirstMissing) < opts.MaxMissing {
				rep.FirstMissing = append(rep.FirstMissing, fmt.Sprintf("%s@%d", pr.ID, pr.Offset))
			}
		}
	}
	for _, pt := range rep.Partitions {
		rep.Total.add(pt)
	}
	slices.SortFunc(rep.Partitions, func(a, b PartitionReport) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return rep
}

func (t *PartitionReport) add(o PartitionReport) {
	t.Produced += o.Produced
	t.Mirrored += o.Mirrored
	t.Filtered += o.Filtered
	t.Lost += o.Lost
	t.Duplicated += o.Duplicated
	t.OutOfOrder += o.OutOfOrder
	t.WrongPartition += o.WrongPartition
	t.Altered += o.Altered
	t.Leaked += o.Leaked
}

// String renders the report as a table, one row per source partition and a total row,
// followed by the target-side counts and the first missing ids.
func (r Report) String() string {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "partition\tproduced\tmirrored\tfiltered\tlost\tduplicated\tout-of-order\twrong-partition\taltered\tleaked\t")
	row := func(name string, p PartitionReport) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", name, p.Produced, p.Mirrored,
			p.Filtered, p.Lost, p.Duplicated, p.OutOfOrder, p.WrongPartition, p.Altered, p.Leaked)
	}
	for _, p := range r.Partitions {
		row(fmt.Sprintf("%s/%d", p.Topic, p.Partition), p)
	}
	row("total", r.Total)
	tw.Flush()
	verdict := "OK"
	if !r.OK() {
		verdict = "FAILED"
	}
	fmt.Fprintf(&b, "target records %d, unknown %d, from aborted transactions %d: %s\n", r.Target, r.Unknown, r.Aborted, verdict)
	if len(r.FirstMissing) > 0 {
		fmt.Fprintf(&b, "first missing: %s\n", strings.Join(r.FirstMissing, ", "))
	}
	return b.String()
}

// Summary renders the totals on one line, for logs and progress output.
func (r Report) Summary() string {
	t := r.Total
	return fmt.Sprintf("produced=%d mirrored=%d filtered=%d lost=%d duplicated=%d out-of-order=%d wrong-partition=%d altered=%d leaked=%d unknown=%d aborted=%d",
		t.Produced, t.Mirrored, t.Filtered, t.Lost, t.Duplicated, t.OutOfOrder, t.WrongPartition, t.Altered, t.Leaked, r.Unknown, r.Aborted)
}
