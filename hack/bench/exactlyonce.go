package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// The exactly-once measurement (issue 14): the engine with delivery exactlyOnce against
// the same engine at-least-once, in the same run and alternated like the throughput
// rounds, and its replication latency at --latency-rate as a read_committed consumer
// sees it. Its goals: throughput >= exactlyOnceThroughputGoal x at-least-once and
// latency p99 < exactlyOnceLatencyGoal x the transaction interval.
const (
	exactlyOnceThroughputGoal = 0.7
	exactlyOnceLatencyGoal    = 2
)

// eosResult is what the exactly-once measurement found (report.EOS).
type eosResult struct {
	// TransactionIntervalMs is the engine's transactionInterval (the config default).
	TransactionIntervalMs float64 `json:"transactionIntervalMs"`
	// AtLeastOnce and ExactlyOnce are the alternated throughput runs, one pair per round.
	AtLeastOnce []engineResult `json:"atLeastOnce"`
	ExactlyOnce []engineResult `json:"exactlyOnce"`
	// Medians over the rounds.
	AtLeastOnceRate float64        `json:"atLeastOnceRecordsPerSecond"`
	ExactlyOnceRate float64        `json:"exactlyOnceRecordsPerSecond"`
	RateRatio       float64        `json:"exactlyOnceToAtLeastOnce"`
	AtLeastOnceCPU  float64        `json:"atLeastOnceCPUSecondsPerMillionRecords"`
	ExactlyOnceCPU  float64        `json:"exactlyOnceCPUSecondsPerMillionRecords"`
	CPURatio        float64        `json:"exactlyOnceCPUToAtLeastOnce"`
	ExactlyOnceRSS  int64          `json:"exactlyOnceMaxRSSBytes"`
	DuplicatesRead  int            `json:"duplicatesReadCommitted"`
	MissingRead     int            `json:"missingReadCommitted"`
	Latency         *latencyResult `json:"latency,omitempty"`
}

// measureExactlyOnce runs the exactly-once measurement into rep (nothing without the
// engine or with --exactly-once=false).
func (b *bench) measureExactlyOnce(ctx context.Context, rep *report) error {
	if b.o.skipEngine || !b.o.exactlyOnce {
		return nil
	}
	c := &config.Config{}
	c.Default()
	res := &eosResult{TransactionIntervalMs: float64(c.TransactionInterval.Milliseconds())}
	n := b.o.records
	alo := engineSpec{name: "eos-baseline", noDataLoss: true, streams: b.o.streams, maxInFlight: b.o.maxInFlight}
	eos := alo
	eos.name, eos.delivery = "exactly-once", config.DeliveryExactlyOnce
	for i := range b.o.rounds {
		// Alternate which goes first, as the throughput rounds do.
		for j := range 2 {
			var err error
			if (i+j)%2 == 0 {
				var r engineResult
				r, err = b.engineThroughput(ctx, alo, n)
				res.AtLeastOnce = append(res.AtLeastOnce, r)
			} else {
				var r engineResult
				var dup, missing int
				r, dup, missing, err = b.exactlyOnceThroughput(ctx, eos, n)
				res.ExactlyOnce = append(res.ExactlyOnce, r)
				res.DuplicatesRead += dup
				res.MissingRead += missing
			}
			if err != nil {
				return fmt.Errorf("exactly-once round %d: %w", i+1, err)
			}
		}
	}
	rate := func(x engineResult) float64 { return x.Rate.RecordsPerSecond() }
	cpu := func(x engineResult) float64 { return x.CPUPerMillion }
	res.AtLeastOnceRate, res.ExactlyOnceRate = medianOf(res.AtLeastOnce, rate), medianOf(res.ExactlyOnce, rate)
	res.AtLeastOnceCPU, res.ExactlyOnceCPU = medianOf(res.AtLeastOnce, cpu), medianOf(res.ExactlyOnce, cpu)
	if res.AtLeastOnceRate > 0 {
		res.RateRatio = res.ExactlyOnceRate / res.AtLeastOnceRate
	}
	if res.AtLeastOnceCPU > 0 {
		res.CPURatio = res.ExactlyOnceCPU / res.AtLeastOnceCPU
	}
	for _, x := range res.ExactlyOnce {
		res.ExactlyOnceRSS = max(res.ExactlyOnceRSS, x.MaxRSS)
	}
	b.logf("  exactly-once: %.0f records/s = %.2f x at-least-once (%.0f records/s), CPU per record %.2f x; read_committed: %d missing, %d duplicates",
		res.ExactlyOnceRate, res.RateRatio, res.AtLeastOnceRate, res.CPURatio, res.MissingRead, res.DuplicatesRead)
	if b.o.latencyTime > 0 {
		spec := eos
		spec.name = "latency-exactly-once"
		lat, err := b.latencyOf(ctx, spec)
		if err != nil {
			return err
		}
		res.Latency = &lat
	}
	rep.EOS = res
	return nil
}

// exactlyOnceThroughput is engineThroughput for delivery exactlyOnce. The target's end
// offsets count transaction markers, so the run is timed by the records the engine
// reports committed (kafka_mirror_records_total counts a transaction's records when it
// committed); afterwards a read_committed reader counts the target's records by their
// sequence number: every one must be there once.
func (b *bench) exactlyOnceThroughput(ctx context.Context, spec engineSpec, want int) (res engineResult, duplicates, missing int, err error) {
	res = engineResult{Name: spec.name, Records: want}
	err = b.withTarget(ctx, spec.name, 0, dataTopic, func(target []string) error {
		p, addr, err := b.launch(b.engineBin, spec, spec.name, dataTopic, target)
		if err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, b.runTimeout(want))
		defer cancel()
		var pr progress
		tick := time.NewTicker(pollInterval)
		defer tick.Stop()
		for pr.doneAt == 0 {
			select {
			case <-wctx.Done():
				stopEngine(p, syscall.SIGKILL, 5*time.Second)
				return fmt.Errorf("while waiting for the %s run (log %s): %w", spec.name, p.LogPath(), wctx.Err())
			case <-p.Done():
				return fmt.Errorf("the %s engine exited (log %s): %w", spec.name, p.LogPath(), p.ExitedError())
			case <-tick.C:
			}
			fams, err := scrape(wctx, addr)
			if err != nil {
				continue // not listening yet
			}
			n := int64(fams.Sum("kafka_mirror_records_total"))
			now := time.Since(p.Started())
			if n > 0 && pr.firstAt == 0 {
				pr.firstAt, pr.firstCount = now, n
			}
			if n >= int64(want) {
				pr.doneAt = now
			}
		}
		u := stopEngine(p, syscall.SIGTERM, time.Minute)
		if u.ExitErr != nil {
			return fmt.Errorf("the %s engine did not stop cleanly: %w; last log lines:\n%s", spec.name, u.ExitErr, p.LogTail(logTailLines))
		}
		res.fill(pr, u, int64(b.gen.recordBytes(0)))
		duplicates, missing, err = readCommittedOnce(ctx, target, dataTopic, want)
		return err
	})
	if err == nil {
		b.logf("  %s: %s, %.2f CPU s per million records, peak RSS %s; read_committed: %d missing, %d duplicates",
			spec.name, fmtRate(res.Rate), res.CPUPerMillion, fmtBytes(res.MaxRSS), missing, duplicates)
	}
	return res, duplicates, missing, err
}

// readCommittedQuiet is how long readCommittedOnce waits for more records after it saw
// every sequence number, so that a duplicate written after them is counted too.
const readCommittedQuiet = time.Second

// readCommittedOnce reads topic on the target as a read_committed consumer and counts,
// by the records' sequence header, the sequence numbers below want it never saw and the
// records it saw more than once.
func readCommittedOnce(ctx context.Context, target []string, topic string, want int) (duplicates, missing int, err error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(target...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return 0, 0, fmt.Errorf("while creating the read_committed reader: %w", err)
	}
	defer cl.Close()
	seen := make([]bool, want)
	distinct := 0
	deadline := time.Now().Add(2*time.Minute + time.Duration(want)*20*time.Microsecond)
	var allAt time.Time
	for time.Now().Before(deadline) && (allAt.IsZero() || time.Since(allAt) < readCommittedQuiet) {
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fs := cl.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return 0, 0, ctx.Err()
		}
		fs.EachRecord(func(r *kgo.Record) {
			for _, h := range r.Headers {
				if h.Key != headerSeq || len(h.Value) != 8 {
					continue
				}
				seq := binary.BigEndian.Uint64(h.Value)
				switch {
				case seq >= uint64(want):
				case seen[seq]:
					duplicates++
				default:
					seen[seq] = true
					distinct++
				}
			}
		})
		if distinct == want && allAt.IsZero() {
			allAt = time.Now()
		}
	}
	return duplicates, want - distinct, nil
}

// exactlyOnceTargets are the goals for the exactly-once engine.
func (r *report) exactlyOnceTargets() []target {
	x := r.EOS
	if x == nil {
		return nil
	}
	ts := []target{
		{"Exactly-once throughput", fmt.Sprintf(">= %.1f x at-least-once, same run", exactlyOnceThroughputGoal),
			fmt.Sprintf("%.2f x (%s vs %s records/s)", x.RateRatio, fmtNum(x.ExactlyOnceRate), fmtNum(x.AtLeastOnceRate)), x.RateRatio >= exactlyOnceThroughputGoal},
		{"Exactly-once, read_committed", "0 missing, 0 duplicates",
			fmt.Sprintf("%d missing, %d duplicates", x.MissingRead, x.DuplicatesRead), x.MissingRead == 0 && x.DuplicatesRead == 0},
	}
	if l := x.Latency; l != nil {
		bound := exactlyOnceLatencyGoal * x.TransactionIntervalMs
		ts = append(ts, target{"Exactly-once replication latency p99", fmt.Sprintf("< %.0f ms (%d x transactionInterval)", bound, exactlyOnceLatencyGoal),
			fmtMs(l.P99Ms), l.P99Ms < bound})
	}
	return ts
}

// exactlyOnceRows are the exactly-once rows of the results table.
func (r *report) exactlyOnceRows() [][]string {
	x := r.EOS
	if x == nil {
		return nil
	}
	ratio := fmt.Sprintf("%.2f x at-least-once", x.RateRatio)
	if e := r.Summary.Engine; e > 0 {
		// The rounds' engine ran the same spec at other moments of the run: a second
		// baseline, against the noise of a shared machine.
		ratio += fmt.Sprintf(" (%.2f x the rounds' engine)", x.ExactlyOnceRate/e)
	}
	rows := [][]string{
		{"engine, delivery exactlyOnce (alternated with at-least-once in the same run)", fmtNum(x.ExactlyOnceRate), "",
			ratio, fmt.Sprintf("%.2f (%.2f x)", x.ExactlyOnceCPU, x.CPURatio), fmtBytes(x.ExactlyOnceRSS)},
	}
	if l := x.Latency; l != nil {
		rows = append(rows, []string{fmt.Sprintf("exactly-once replication latency at %d records/s, read_committed: p50 / p99 / max", l.Rate),
			"", "", fmt.Sprintf("%.1f / %.1f / %.1f ms", l.P50Ms, l.P99Ms, l.MaxMs), "", ""})
	}
	return rows
}

// exactlyOnceMarkdown is the exactly-once section of results.md.
func (r *report) exactlyOnceMarkdown(w io.Writer) {
	x := r.EOS
	if x == nil {
		return
	}
	fmt.Fprintf(w, "\n## Exactly-once\n\n`delivery: exactlyOnce` (transactionInterval %.0f ms) against the same engine at-least-once, alternated in %d round(s) of %s records; the exactly-once runs are timed by the records the engine reports committed (the target's end offsets count transaction markers) and then read back read_committed: %d missing, %d duplicates.\n\n",
		x.TransactionIntervalMs, len(x.ExactlyOnce), fmtCount(r.Settings.Records), x.MissingRead, x.DuplicatesRead)
	t := [][]string{{"round", "at-least-once", "exactly-once", "ratio", "CPU s / M records, at-least-once", "CPU s / M records, exactly-once"}}
	for i := range min(len(x.AtLeastOnce), len(x.ExactlyOnce)) {
		a, e := x.AtLeastOnce[i], x.ExactlyOnce[i]
		t = append(t, []string{fmt.Sprint(i + 1), fmtNum(a.Rate.RecordsPerSecond()), fmtNum(e.Rate.RecordsPerSecond()),
			fmt.Sprintf("%.2f", e.Rate.RecordsPerSecond()/a.Rate.RecordsPerSecond()), fmt.Sprintf("%.2f", a.CPUPerMillion), fmt.Sprintf("%.2f", e.CPUPerMillion)})
	}
	writeMarkdownTable(w, t)
	if l := x.Latency; l != nil {
		fmt.Fprintf(w, "\nReplication latency, %d records at %d records/s, read back read_committed:\n\n", l.Records, l.Rate)
		lt := [][]string{{"", "p50", "p90", "p99", "max"}, {"source produce -> target read_committed read", fmtMs(l.P50Ms), fmtMs(l.P90Ms), fmtMs(l.P99Ms), fmtMs(l.MaxMs)}}
		if l.EngineP50Ms >= 0 {
			lt = append(lt, []string{"transaction open -> committed (kafka_mirror_replication_latency_seconds, bucket-interpolated)", fmtMs(l.EngineP50Ms), "", fmtMs(l.EngineP99Ms), ""})
		}
		writeMarkdownTable(w, lt)
	}
}
