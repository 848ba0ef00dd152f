package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// A CPU profile says where a process spent its time function by function; comparing the
// engine with the bare forwarder needs it by kind of work. cpuBreakdown files every
// sample of a profile under the goroutine that spent it, recognised by a frame of its
// stack, so that the engine's and the forwarder's columns line up: both run the same
// sarama producer and consumer, and what differs is the loop between them and the ack
// reader behind the producer.

// cpuClass is one row of the breakdown: samples with a frame matching match, and no
// frame matching an earlier class, are counted in it.
type cpuClass struct {
	name  string
	match *regexp.Regexp
}

// cpuClasses are tried in order; the first whose pattern matches any frame of a
// sample's stack takes the sample.
var cpuClasses = []cpuClass{
	{"garbage collector (background mark, sweep, scavenge)", regexp.MustCompile(`^runtime\.(gcBgMarkWorker|bgsweep|bgscavenge)$`)},
	{"consume loop: record -> producer input (engine: claim read loop, tracker, budgets; forwarder: copy)",
		regexp.MustCompile(`mirror\.\(\*stream\)\.ConsumeClaim$|^main\.forwardHandler\.ConsumeClaim$`)},
	{"ack reader: producer results (engine: tracker, budgets, metrics; forwarder: drain)",
		regexp.MustCompile(`mirror\.\(\*sender\)\.readAcks$|^main\.forward\.func1$`)},
	{"pipelined producer (mirror/pipeline): batching, encoding, sending, results", regexp.MustCompile(`mirror/pipeline\.\(\*Producer\)\.run$`)},
	{"sarama producer: dispatch to partitions", regexp.MustCompile(`sarama\.\(\*(asyncProducer\)\.dispatcher|topicProducer|partitionProducer)`)},
	{"sarama producer: batching, encoding, sending, results", regexp.MustCompile(`sarama\.\(\*(brokerProducer|asyncProducer\)\.returnSuccesses|produceSet)|sarama\.\(\*Broker\)\.AsyncProduce`)},
	{"sarama consumer: fetching, decoding", regexp.MustCompile(`sarama\.\(\*(brokerConsumer|partitionConsumer|consumer\))`)},
	{"sarama connections: reading responses", regexp.MustCompile(`sarama\.\(\*Broker\)\.responseReceiver`)},
	{"engine: commits, topic sync, metrics, offset syncs", regexp.MustCompile(`kafka-mirror-operator/mirror`)},
	{"sarama: group membership, metadata, other", regexp.MustCompile(`IBM/sarama`)},
	{"Go runtime: scheduler, timers, other", regexp.MustCompile(`^runtime\.`)},
}

// otherClass takes the samples no class matched.
const otherClass = "other"

// cpuBreakdown is a profile's CPU time by class, in seconds.
type cpuBreakdown struct {
	Total   float64            `json:"totalSeconds"`
	Seconds map[string]float64 `json:"seconds"`
}

// readBreakdown runs `go tool pprof -traces` on the CPU profile at path and classifies
// its samples.
func readBreakdown(ctx context.Context, path string) (cpuBreakdown, error) {
	out, err := exec.CommandContext(ctx, "go", "tool", "pprof", "-traces", path).Output()
	if err != nil {
		return cpuBreakdown{}, fmt.Errorf("while reading the traces of %s: %w", path, err)
	}
	return parseTraces(strings.NewReader(string(out)))
}

// parseTraces classifies the samples of `go tool pprof -traces` output: blocks between
// separator lines, each starting with the sample's value and its leaf frame, then one
// frame per line down to the goroutine's root.
func parseTraces(r io.Reader) (cpuBreakdown, error) {
	b := cpuBreakdown{Seconds: map[string]float64{}}
	var value float64
	var frames []string
	flush := func() {
		if value > 0 {
			b.Seconds[classify(frames)] += value
			b.Total += value
		}
		value, frames = 0, frames[:0]
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	inSamples := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "-----------+") {
			flush()
			inSamples = true
			continue
		}
		if !inSamples || strings.TrimSpace(line) == "" {
			continue
		}
		fields := strings.Fields(line)
		if !strings.HasPrefix(line, " ") || len(fields) == 0 {
			continue
		}
		if d, err := time.ParseDuration(fields[0]); err == nil && value == 0 && len(frames) == 0 {
			value = d.Seconds()
			fields = fields[1:]
		}
		if len(fields) > 0 {
			frames = append(frames, fields[0])
		}
	}
	flush()
	if err := sc.Err(); err != nil {
		return b, err
	}
	if b.Total == 0 {
		return b, fmt.Errorf("no samples in the profile's traces")
	}
	return b, nil
}

// classify returns the first class with a frame of frames, or otherClass.
func classify(frames []string) string {
	for _, c := range cpuClasses {
		for _, f := range frames {
			if c.match.MatchString(f) {
				return c.name
			}
		}
	}
	return otherClass
}

// breakdownMarkdown writes the engine's and the forwarder's breakdowns side by side in
// CPU seconds per million records.
func breakdownMarkdown(w io.Writer, engine, forwarder cpuBreakdown, records int) {
	perM := 1e6 / float64(records)
	rows := [][]string{{"CPU s per million records, by goroutine", "engine", "forwarder", "engine - forwarder"}}
	names := make([]string, 0, len(cpuClasses)+1)
	for _, c := range cpuClasses {
		names = append(names, c.name)
	}
	names = append(names, otherClass)
	for _, n := range names {
		e, f := engine.Seconds[n]*perM, forwarder.Seconds[n]*perM
		if e == 0 && f == 0 {
			continue
		}
		rows = append(rows, []string{n, fmtSeconds(e), fmtSeconds(f), fmtSignedSeconds(e - f)})
	}
	rows = append(rows, []string{"**total (profile samples)**", fmtSeconds(engine.Total * perM), fmtSeconds(forwarder.Total * perM), fmtSignedSeconds((engine.Total - forwarder.Total) * perM)})
	writeMarkdownTable(w, rows)
}

func fmtSeconds(s float64) string { return strconv.FormatFloat(s, 'f', 2, 64) }

func fmtSignedSeconds(s float64) string {
	if s >= 0 {
		return "+" + fmtSeconds(s)
	}
	return fmtSeconds(s)
}
