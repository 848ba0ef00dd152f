package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror"
)

// MarshalJSON writes a rate with its derived rates, so the JSON reads without arithmetic.
func (r rate) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Records          int     `json:"records"`
		Bytes            int64   `json:"bytes"`
		Seconds          float64 `json:"seconds"`
		RecordsPerSecond float64 `json:"recordsPerSecond"`
		MBPerSecond      float64 `json:"mbPerSecond"`
	}{r.Records, r.Bytes, r.Elapsed.Seconds(), r.RecordsPerSecond(), r.MBPerSecond()})
}

// engineResult is one engine run that mirrored a fixed number of records.
type engineResult struct {
	Name    string `json:"name"`
	Records int    `json:"records"`
	// Rate is measured from the first record seen on the target to the last, so the
	// engine's start (process, group join) is not in it; StartupSeconds is.
	Rate           rate    `json:"rate"`
	StartupSeconds float64 `json:"startupSeconds"`
	WallSeconds    float64 `json:"wallSeconds"`
	// CPUSeconds is the engine process's user + system time over its whole life.
	CPUSeconds    float64 `json:"cpuSeconds"`
	CPUPerMillion float64 `json:"cpuSecondsPerMillionRecords"`
	MaxRSS        int64   `json:"maxRSSBytes"`
	// MaxAnonRSS is MaxRSS without the binary's file-backed pages (usage.MaxAnonRSS).
	MaxAnonRSS int64 `json:"maxAnonRSSBytes,omitempty"`
	// SteadyRate is the rate between steadyFrom and steadyTo of the records (the steady
	// state); StartToLast is the rate from the process's start to the last record
	// (Records / WallSeconds), and StartToSteady their ratio: what the start costs.
	SteadyRate    rate    `json:"steadyRate"`
	StartToLast   float64 `json:"startToLastRecordsPerSecond"`
	StartToSteady float64 `json:"startToLastToSteady"`
}

func (r *engineResult) fill(pr progress, u usage, bytesPerRecord int64) {
	steady := int64(r.Records) - pr.firstCount
	elapsed := pr.doneAt - pr.firstAt
	if steady <= 0 || elapsed <= 0 {
		// Everything arrived between two polls: fall back to the whole run.
		steady, elapsed = int64(r.Records), pr.doneAt
	}
	r.Rate = rate{Records: int(steady), Bytes: steady * bytesPerRecord, Elapsed: elapsed}
	r.StartupSeconds = pr.firstAt.Seconds()
	r.WallSeconds = pr.doneAt.Seconds()
	r.CPUSeconds = u.CPU.Seconds()
	r.CPUPerMillion = u.CPU.Seconds() / float64(r.Records) * 1e6
	r.MaxRSS = u.MaxRSS
	r.MaxAnonRSS = u.MaxAnonRSS
	if d := pr.highAt - pr.lowAt; d > 0 && pr.highCount > pr.lowCount {
		n := pr.highCount - pr.lowCount
		r.SteadyRate = rate{Records: int(n), Bytes: n * bytesPerRecord, Elapsed: d}
	}
	if pr.doneAt > 0 {
		r.StartToLast = float64(r.Records) / pr.doneAt.Seconds()
	}
	if sr := r.SteadyRate.RecordsPerSecond(); sr > 0 {
		r.StartToSteady = r.StartToLast / sr
	}
}

// limitResult is one raw-client measurement of the broker-bound limit, with the
// client process's CPU time per million records and peak RSS for comparison with the
// engine's.
type limitResult struct {
	Rate          rate    `json:"rate"`
	CPUPerMillion float64 `json:"cpuSecondsPerMillionRecords"`
	MaxRSS        int64   `json:"maxRSSBytes"`
}

// round is one pass of the alternated throughput measurements, with its ratios: ratios
// of measurements taken minutes apart on the same machine cancel most of its noise.
type round struct {
	Round        int         `json:"round"`
	ProduceLimit limitResult `json:"produceLimit"`
	// ProduceFastLimit is the raw produce with the producer settings of
	// `noDataLoss: false`, to tell the client's share of that difference from the engine's.
	ProduceFastLimit limitResult `json:"produceLimitNoDataLossOff"`
	ConsumeLimit     limitResult `json:"consumeLimit"`
	// Pipe is the raw consume-to-produce pipe (see pipeLimit).
	Pipe       limitResult   `json:"rawPipe"`
	Engine     *engineResult `json:"engine,omitempty"`
	EngineFast *engineResult `json:"engineNoDataLossOff,omitempty"`
	EngineCEL  *engineResult `json:"engineCELFilter,omitempty"`
	// Forwarder is the bare consumer-group forwarder (forwarder.go), the reference of
	// issue 18; EngineToForwarder, EngineCPUToForwarder and EngineRSSToForwarder compare
	// Engine's rate, CPU per record and peak RSS with it.
	Forwarder            *engineResult `json:"forwarder,omitempty"`
	EngineToForwarder    float64       `json:"engineToForwarder,omitempty"`
	EngineCPUToForwarder float64       `json:"engineCPUToForwarder,omitempty"`
	EngineRSSToForwarder float64       `json:"engineRSSToForwarder,omitempty"`
	// EngineAnonToForwarder compares the anonymous peak RSS (MaxAnonRSS).
	EngineAnonToForwarder float64 `json:"engineAnonRSSToForwarder,omitempty"`
	// Limit is the slower of the produce and consume limits, in records per second.
	Limit float64 `json:"limitRecordsPerSecond"`
	// EngineToLimit is Engine's rate / Limit; FastToEngine and CELToEngine are the
	// other variants' rates / Engine's rate. RawFastToRaw is the same comparison as
	// FastToEngine for the raw producer.
	EngineToLimit float64 `json:"engineToLimit,omitempty"`
	// PipeToLimit is the raw pipe's rate / Limit; EngineToPipe is Engine's / the pipe's.
	PipeToLimit  float64 `json:"rawPipeToLimit"`
	EngineToPipe float64 `json:"engineToRawPipe,omitempty"`
	RawFastToRaw float64 `json:"rawNoDataLossOffToRaw"`
	// EngineCPUToClients is the engine's CPU time per record / (the raw producer's +
	// the raw consumer's): what the engine costs beyond the two clients it is made of.
	// CPU time suffers less than wall time from a busy machine.
	EngineCPUToClients float64 `json:"engineCPUToClients,omitempty"`
	FastToEngine       float64 `json:"noDataLossOffToEngine,omitempty"`
	CELToEngine        float64 `json:"celFilterToEngine,omitempty"`
	// FastCPUToEngine and CELCPUToEngine compare CPU time per record with Engine's:
	// the same comparisons as FastToEngine and CELToEngine, less exposed to noise.
	FastCPUToEngine float64 `json:"noDataLossOffCPUToEngine,omitempty"`
	CELCPUToEngine  float64 `json:"celFilterCPUToEngine,omitempty"`
}

func (r *round) computeRatios() {
	r.Limit = min(r.ProduceLimit.Rate.RecordsPerSecond(), r.ConsumeLimit.Rate.RecordsPerSecond())
	if p := r.ProduceLimit.Rate.RecordsPerSecond(); p > 0 {
		r.RawFastToRaw = r.ProduceFastLimit.Rate.RecordsPerSecond() / p
	}
	if r.Limit == 0 {
		return
	}
	r.PipeToLimit = r.Pipe.Rate.RecordsPerSecond() / r.Limit
	if r.Engine == nil {
		return
	}
	if p := r.Pipe.Rate.RecordsPerSecond(); p > 0 {
		r.EngineToPipe = r.Engine.Rate.RecordsPerSecond() / p
	}
	if c := r.ProduceLimit.CPUPerMillion + r.ConsumeLimit.CPUPerMillion; c > 0 {
		r.EngineCPUToClients = r.Engine.CPUPerMillion / c
	}
	if c := r.Engine.CPUPerMillion; c > 0 {
		if r.EngineFast != nil {
			r.FastCPUToEngine = r.EngineFast.CPUPerMillion / c
		}
		if r.EngineCEL != nil {
			r.CELCPUToEngine = r.EngineCEL.CPUPerMillion / c
		}
	}
	if f := r.Forwarder; f != nil && f.Rate.RecordsPerSecond() > 0 && f.CPUPerMillion > 0 && f.MaxRSS > 0 {
		r.EngineToForwarder = r.Engine.Rate.RecordsPerSecond() / f.Rate.RecordsPerSecond()
		r.EngineCPUToForwarder = r.Engine.CPUPerMillion / f.CPUPerMillion
		r.EngineRSSToForwarder = float64(r.Engine.MaxRSS) / float64(f.MaxRSS)
		if f.MaxAnonRSS > 0 {
			r.EngineAnonToForwarder = float64(r.Engine.MaxAnonRSS) / float64(f.MaxAnonRSS)
		}
	}
	e := r.Engine.Rate.RecordsPerSecond()
	r.EngineToLimit = e / r.Limit
	if e > 0 {
		if r.EngineFast != nil {
			r.FastToEngine = r.EngineFast.Rate.RecordsPerSecond() / e
		}
		if r.EngineCEL != nil {
			r.CELToEngine = r.EngineCEL.Rate.RecordsPerSecond() / e
		}
	}
}

func (r *round) summary() string {
	s := fmt.Sprintf("limit %.0f records/s", r.Limit)
	if r.Engine != nil {
		s += fmt.Sprintf(", engine/limit %.2f, noDataLoss off/engine %.2f, CEL/engine %.2f", r.EngineToLimit, r.FastToEngine, r.CELToEngine)
	}
	return s
}

// throttleResult is one run against a throttled target.
type throttleResult struct {
	MaxInFlightPerPartition int           `json:"maxInFlightPerPartition"`
	Partitions              int           `json:"partitions"`
	BytesPerSecond          int64         `json:"targetBytesPerSecond"`
	Duration                time.Duration `json:"durationNs"`
	// MaxInFlight is the most records in flight seen (kafka_mirror_inflight_records).
	MaxInFlight int64 `json:"maxInFlight"`
	// Records is what the engine mirrored during the run.
	Records int64         `json:"records"`
	MaxRSS  int64         `json:"maxRSSBytes"`
	CPU     time.Duration `json:"cpuNs"`
}

// bound is the most records the engine may hold in flight in the run: partitions x
// maxInFlightPerPartition, capped by the engine's process-wide bound.
func (t throttleResult) bound() int64 {
	return mirror.InFlightRecordsBound(t.MaxInFlightPerPartition, t.Partitions)
}

func (t throttleResult) rate() float64 {
	if t.Duration <= 0 {
		return 0
	}
	return float64(t.Records) / t.Duration.Seconds()
}

// summary holds the medians over rounds and the memory comparison: rates in records
// per second, CPU in seconds per million records, ratios as plain factors.
type summary struct {
	// The broker-bound limit and the raw clients.
	ProduceLimit     float64 `json:"produceLimitRecordsPerSecond"`
	ProduceFastLimit float64 `json:"produceLimitNoDataLossOffRecordsPerSecond"`
	RawFastToRaw     float64 `json:"rawNoDataLossOffToRaw"`
	ConsumeLimit     float64 `json:"consumeLimitRecordsPerSecond"`
	Limit            float64 `json:"limitRecordsPerSecond"`
	LimitMBPerSecond float64 `json:"limitMBPerSecond"`
	ProduceCPU       float64 `json:"produceLimitCPUSecondsPerMillionRecords"`
	ConsumeCPU       float64 `json:"consumeLimitCPUSecondsPerMillionRecords"`
	Pipe             float64 `json:"rawPipeRecordsPerSecond"`
	PipeToLimit      float64 `json:"rawPipeToLimit"`
	PipeCPU          float64 `json:"rawPipeCPUSecondsPerMillionRecords"`

	// The engine and its variants.
	Engine             float64 `json:"engineRecordsPerSecond,omitempty"`
	EngineMBPerSecond  float64 `json:"engineMBPerSecond,omitempty"`
	EngineToLimit      float64 `json:"engineToLimit,omitempty"`
	EngineToPipe       float64 `json:"engineToRawPipe,omitempty"`
	CPUPerMillion      float64 `json:"cpuSecondsPerMillionRecords,omitempty"`
	EngineCPUToClients float64 `json:"engineCPUToClients,omitempty"`
	EngineFast         float64 `json:"noDataLossOffRecordsPerSecond,omitempty"`
	FastToEngine       float64 `json:"noDataLossOffToEngine,omitempty"`
	FastCPUToEngine    float64 `json:"noDataLossOffCPUToEngine,omitempty"`
	EngineCEL          float64 `json:"celFilterRecordsPerSecond,omitempty"`
	CELToEngine        float64 `json:"celFilterToEngine,omitempty"`
	CELCPUToEngine     float64 `json:"celFilterCPUToEngine,omitempty"`

	// Against the bare forwarder (issue 18): medians of the rounds' ratios, and of
	// each side's rate, CPU, peak RSS, start (first record seen on the target, seconds
	// after the process started) and start-to-last rate / steady rate.
	EngineToForwarder      float64 `json:"engine_vs_forwarder,omitempty"`
	EngineCPUToForwarder   float64 `json:"engineCPUToForwarder,omitempty"`
	EngineRSSToForwarder   float64 `json:"engineRSSToForwarder,omitempty"`
	EngineAnonToForwarder  float64 `json:"engineAnonRSSToForwarder,omitempty"`
	EngineMaxAnonRSS       int64   `json:"engineMaxAnonRSSBytes,omitempty"`
	ForwarderMaxAnonRSS    int64   `json:"forwarderMaxAnonRSSBytes,omitempty"`
	Forwarder              float64 `json:"forwarderRecordsPerSecond,omitempty"`
	ForwarderCPU           float64 `json:"forwarderCPUSecondsPerMillionRecords,omitempty"`
	ForwarderMaxRSS        int64   `json:"forwarderMaxRSSBytes,omitempty"`
	EngineStartup          float64 `json:"engineFirstRecordSeconds,omitempty"`
	ForwarderStartup       float64 `json:"forwarderFirstRecordSeconds,omitempty"`
	EngineStartToSteady    float64 `json:"engineStartToLastToSteady,omitempty"`
	ForwarderStartToSteady float64 `json:"forwarderStartToLastToSteady,omitempty"`
	// BigToEngine is the big run's rate / the 1M median; BigForwarderToForwarder the
	// same for the forwarder, to tell the brokers' slowdown from the engine's.
	BigToEngine             float64 `json:"bigToEngine,omitempty"`
	BigForwarderToForwarder float64 `json:"bigForwarderToForwarder,omitempty"`

	// Memory. MaxRSS is the highest peak RSS of the engine runs with no-data-loss over
	// the rounds.
	MaxRSS           int64   `json:"maxRSSBytes,omitempty"`
	BigCPUPerMillion float64 `json:"bigCPUSecondsPerMillionRecords,omitempty"`
	BigMaxRSS        int64   `json:"bigMaxRSSBytes,omitempty"`
	// BigRSSGrowth is the big run's peak RSS / the normal run's peak RSS - 1.
	BigRSSGrowth float64 `json:"bigRSSGrowth,omitempty"`
	// BytesPerInFlightRecord is the slope of peak RSS over records in flight between
	// the throttled runs: what one more record in flight costs in memory.
	BytesPerInFlightRecord float64 `json:"bytesPerInFlightRecord,omitempty"`
}

// target is one of the goals, read from the ratios.
type target struct {
	Name  string `json:"name"`
	Goal  string `json:"goal"`
	Value string `json:"value"`
	Met   bool   `json:"met"`
}

// settings are the workload and machine the results belong to.
type settings struct {
	Records          int      `json:"records"`
	BigRecords       int      `json:"bigRecords"`
	ValueSize        int      `json:"valueSize"`
	Partitions       int      `json:"partitions"`
	Brokers          int      `json:"brokersPerCluster"`
	Rounds           int      `json:"rounds"`
	GroupsRounds     int      `json:"groupsRounds"`
	Streams          int      `json:"streams"`
	MaxInFlight      int      `json:"maxInFlightPerPartition"`
	LatencyRate      int      `json:"latencyRecordsPerSecond"`
	LatencySeconds   float64  `json:"latencySeconds"`
	ThrottleBytes    int64    `json:"throttleBytesPerSecond"`
	ThrottleSeconds  float64  `json:"throttleSeconds"`
	Quick            bool     `json:"quick"`
	CELFilter        string   `json:"celFilter"`
	KeyBytes         int      `json:"keyBytes"`
	HeadersPerRecord int      `json:"headersPerRecord"`
	EngineEnv        []string `json:"engineEnv,omitempty"`
}

// report is everything one run measured; it is written as results.json and results.md.
type report struct {
	Date      string         `json:"date"`
	Commit    string         `json:"commit"`
	GoVersion string         `json:"goVersion"`
	OS        string         `json:"os"`
	Arch      string         `json:"arch"`
	Cores     int            `json:"cores"`
	CPUModel  string         `json:"cpuModel"`
	Seconds   float64        `json:"seconds"`
	Settings  settings       `json:"settings"`
	Summary   summary        `json:"summary"`
	Targets   []target       `json:"targets"`
	Rounds    []round        `json:"rounds"`
	Latency   *latencyResult `json:"latency,omitempty"`
	EOS       *eosResult     `json:"exactlyOnce,omitempty"`
	Big       *engineResult  `json:"big,omitempty"`
	// BigForwarder is the forwarder over the big run's records.
	BigForwarder *engineResult     `json:"bigForwarder,omitempty"`
	Throttled    []throttleResult  `json:"throttled,omitempty"`
	Large        *largeResult      `json:"large,omitempty"`
	Profile      *profileResult    `json:"profile,omitempty"`
	Groups       *groupsResult     `json:"groups,omitempty"`
	Notes        map[string]string `json:"notes,omitempty"`
	started      time.Time
}

func newReport(o options) *report {
	return &report{
		Date:      time.Now().UTC().Format(time.RFC3339),
		Commit:    gitCommit(),
		GoVersion: runtime.Version(),
		OS:        runtime.GOOS,
		Arch:      runtime.GOARCH,
		Cores:     runtime.NumCPU(),
		CPUModel:  cpuModel(),
		Settings: settings{
			Records: o.records, BigRecords: o.bigRecords, ValueSize: o.valueSize, Partitions: o.partitions,
			Brokers: o.brokers, Rounds: o.rounds, GroupsRounds: o.groupsRounds, Streams: o.streams, MaxInFlight: o.maxInFlight, LatencyRate: o.latencyRate,
			LatencySeconds: o.latencyTime.Seconds(), ThrottleBytes: o.throttle, ThrottleSeconds: o.throttleTime.Seconds(),
			Quick: o.quick, CELFilter: celFilter, KeyBytes: len("key-000000"), HeadersPerRecord: 2, EngineEnv: o.engineEnv,
		},
		started: time.Now(),
	}
}

// finish computes the summary and the targets.
func (r *report) finish() {
	r.Seconds = time.Since(r.started).Seconds()
	s := &r.Summary
	s.ProduceLimit = medianOf(r.Rounds, func(x round) float64 { return x.ProduceLimit.Rate.RecordsPerSecond() })
	s.ConsumeLimit = medianOf(r.Rounds, func(x round) float64 { return x.ConsumeLimit.Rate.RecordsPerSecond() })
	s.Limit = medianOf(r.Rounds, func(x round) float64 { return x.Limit })
	s.ProduceFastLimit = medianOf(r.Rounds, func(x round) float64 { return x.ProduceFastLimit.Rate.RecordsPerSecond() })
	s.RawFastToRaw = medianOf(r.Rounds, func(x round) float64 { return x.RawFastToRaw })
	s.Pipe = medianOf(r.Rounds, func(x round) float64 { return x.Pipe.Rate.RecordsPerSecond() })
	s.PipeToLimit = medianOf(r.Rounds, func(x round) float64 { return x.PipeToLimit })
	s.PipeCPU = medianOf(r.Rounds, func(x round) float64 { return x.Pipe.CPUPerMillion })
	s.ProduceCPU = medianOf(r.Rounds, func(x round) float64 { return x.ProduceLimit.CPUPerMillion })
	s.ConsumeCPU = medianOf(r.Rounds, func(x round) float64 { return x.ConsumeLimit.CPUPerMillion })
	s.LimitMBPerSecond = medianOf(r.Rounds, func(x round) float64 {
		return min(x.ProduceLimit.Rate.MBPerSecond(), x.ConsumeLimit.Rate.MBPerSecond())
	})
	if len(r.Rounds) == 0 || r.Rounds[0].Engine == nil {
		return
	}
	s.Engine = medianOf(r.Rounds, func(x round) float64 { return x.Engine.Rate.RecordsPerSecond() })
	s.EngineMBPerSecond = medianOf(r.Rounds, func(x round) float64 { return x.Engine.Rate.MBPerSecond() })
	s.EngineFast = medianOf(r.Rounds, func(x round) float64 { return x.EngineFast.Rate.RecordsPerSecond() })
	s.EngineCEL = medianOf(r.Rounds, func(x round) float64 { return x.EngineCEL.Rate.RecordsPerSecond() })
	s.EngineToLimit = medianOf(r.Rounds, func(x round) float64 { return x.EngineToLimit })
	s.EngineToPipe = medianOf(r.Rounds, func(x round) float64 { return x.EngineToPipe })
	s.FastToEngine = medianOf(r.Rounds, func(x round) float64 { return x.FastToEngine })
	s.CELToEngine = medianOf(r.Rounds, func(x round) float64 { return x.CELToEngine })
	s.CPUPerMillion = medianOf(r.Rounds, func(x round) float64 { return x.Engine.CPUPerMillion })
	s.EngineCPUToClients = medianOf(r.Rounds, func(x round) float64 { return x.EngineCPUToClients })
	s.FastCPUToEngine = medianOf(r.Rounds, func(x round) float64 { return x.FastCPUToEngine })
	s.CELCPUToEngine = medianOf(r.Rounds, func(x round) float64 { return x.CELCPUToEngine })
	// Peak RSS is a maximum, so the 1M figure is the highest over the rounds, as the big
	// run's is the highest over its (longer) run: a median of peaks would make the big
	// run look worse for having had more garbage collections in which to overshoot.
	for _, x := range r.Rounds {
		s.MaxRSS = max(s.MaxRSS, x.Engine.MaxRSS)
	}

	r.Targets = append(r.Targets,
		target{"Throughput with no-data-loss", ">= 0.80 x the broker-bound limit",
			fmt.Sprintf("%.2f x", s.EngineToLimit), s.EngineToLimit >= 0.8},
		target{"Throughput with no-data-loss, against the raw pipe (supplementary)", ">= 0.80 x the raw pipe, which shares the cores with both clusters as the engine does",
			fmt.Sprintf("%.2f x", s.EngineToPipe), s.EngineToPipe >= 0.8},
		target{"Cost of a CEL filter", "<= 15% of throughput",
			fmt.Sprintf("%.0f%% (CPU per record %+.0f%%)", (1-s.CELToEngine)*100, (s.CELCPUToEngine-1)*100), 1-s.CELToEngine <= 0.15},
		target{"noDataLoss: false", "faster than no-data-loss",
			fmt.Sprintf("%.2f x (CPU per record %+.0f%%)", s.FastToEngine, (s.FastCPUToEngine-1)*100), s.FastToEngine > 1},
	)
	r.finishForwarder()
	if r.Big != nil {
		s.BigCPUPerMillion = r.Big.CPUPerMillion
		s.BigMaxRSS = r.Big.MaxRSS
		if s.MaxRSS > 0 {
			s.BigRSSGrowth = float64(s.BigMaxRSS)/float64(s.MaxRSS) - 1
		}
		r.Targets = append(r.Targets, target{
			fmt.Sprintf("Peak RSS at %s vs %s records", fmtCount(r.Settings.BigRecords), fmtCount(r.Settings.Records)),
			"within 10%", fmt.Sprintf("%+.1f%% (%s vs %s)", s.BigRSSGrowth*100, fmtBytes(s.BigMaxRSS), fmtBytes(s.MaxRSS)),
			s.BigRSSGrowth <= 0.10,
		})
	}
	if n := len(r.Throttled); n >= 2 {
		lo, hi := r.Throttled[0], r.Throttled[0]
		for _, t := range r.Throttled {
			if t.MaxInFlight < lo.MaxInFlight {
				lo = t
			}
			if t.MaxInFlight > hi.MaxInFlight {
				hi = t
			}
		}
		if hi.MaxInFlight > lo.MaxInFlight {
			s.BytesPerInFlightRecord = float64(hi.MaxRSS-lo.MaxRSS) / float64(hi.MaxInFlight-lo.MaxInFlight)
		}
	}
	if l := r.Large; l != nil {
		r.Targets = append(r.Targets, target{
			fmt.Sprintf("Slow target, %d KiB records", l.ValueSize>>10),
			fmt.Sprintf("in flight <= maxInFlightBytes %s", fmtBytes(l.MaxInFlightBytes)),
			fmt.Sprintf("%s in flight at most, peak RSS %s (consumer read-ahead up to %s)", fmtBytes(l.PeakInFlightBytes), fmtBytes(l.MaxRSS), fmtBytes(l.readAhead())),
			l.PeakInFlightBytes <= l.MaxInFlightBytes,
		})
	}
	for _, t := range r.Throttled {
		r.Targets = append(r.Targets, target{
			fmt.Sprintf("Slow target, maxInFlightPerPartition %d", t.MaxInFlightPerPartition),
			fmt.Sprintf("in flight <= %d (partitions x limit, at most the engine's process-wide bound)", t.bound()),
			fmt.Sprintf("%d in flight at most, peak RSS %s", t.MaxInFlight, fmtBytes(t.MaxRSS)),
			t.MaxInFlight <= t.bound(),
		})
	}
	r.Targets = append(r.Targets, r.groupsTargets()...)
	r.Targets = append(r.Targets, r.exactlyOnceTargets()...)
}

func medianOf[T any](xs []T, f func(T) float64) float64 {
	vs := make([]float64, 0, len(xs))
	for _, x := range xs {
		vs = append(vs, f(x))
	}
	return median(vs)
}

// median of vs (the mean of the middle two for an even count); 0 for none.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// print writes the summary table to w.
func (r *report) print(w io.Writer) {
	fmt.Fprintf(w, "\nkafka-mirror benchmark, %s, %d cores (%s), %s, commit %s\n\n", r.Date, r.Cores, r.CPUModel, r.GoVersion, r.Commit)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, row := range r.tableRows() {
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	_ = tw.Flush()
	if len(r.Targets) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "target\tgoal\tmeasured\tmet")
		for _, t := range r.Targets {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", t.Name, t.Goal, t.Value, yesNo(t.Met))
		}
		_ = tw.Flush()
	}
	fmt.Fprintln(w)
}

// tableRows is the main results table, shared by the terminal and the Markdown.
func (r *report) tableRows() [][]string {
	s := r.Summary
	rows := [][]string{{"measurement", "records/s", "MB/s", "ratio", "CPU s / M records", "peak RSS"}}
	rows = append(rows,
		[]string{"raw produce into the target (engine's producer settings)", fmtNum(s.ProduceLimit), "", "", fmt.Sprintf("%.2f", s.ProduceCPU), ""},
		[]string{"raw produce, noDataLoss: false settings", fmtNum(s.ProduceFastLimit), "", fmt.Sprintf("%.2f x raw produce", s.RawFastToRaw), "", ""},
		[]string{"raw consume from the source (engine's consumer settings)", fmtNum(s.ConsumeLimit), "", "", fmt.Sprintf("%.2f", s.ConsumeCPU), ""},
		[]string{"broker-bound limit (slower of the two)", fmtNum(s.Limit), fmt.Sprintf("%.1f", s.LimitMBPerSecond), "1.00 x limit", "", ""},
		[]string{"raw pipe: consume -> produce, nothing else (no tracking, commits, metrics)", fmtNum(s.Pipe), "",
			fmt.Sprintf("%.2f x limit", s.PipeToLimit), fmt.Sprintf("%.2f", s.PipeCPU), ""},
	)
	if s.Engine > 0 {
		rows = append(rows,
			[]string{"engine, no-data-loss, partitions preserved", fmtNum(s.Engine), fmt.Sprintf("%.1f", s.EngineMBPerSecond),
				fmt.Sprintf("%.2f x limit", s.EngineToLimit), fmt.Sprintf("%.2f", s.CPUPerMillion), fmtBytes(s.MaxRSS)},
			[]string{"engine vs raw pipe", "", "", fmt.Sprintf("%.2f x raw pipe", s.EngineToPipe), "", ""},
			[]string{"engine CPU per record vs raw produce + raw consume", "", "", fmt.Sprintf("%.2f x", s.EngineCPUToClients), "", ""},
			[]string{"engine, noDataLoss: false", fmtNum(s.EngineFast), "", fmt.Sprintf("%.2f x engine", s.FastToEngine),
				fmt.Sprintf("%.2f x engine", s.FastCPUToEngine), ""},
			[]string{"engine, CEL filter", fmtNum(s.EngineCEL), "", fmt.Sprintf("%.2f x engine", s.CELToEngine),
				fmt.Sprintf("%.2f x engine", s.CELCPUToEngine), ""},
		)
	}
	rows = append(rows, r.forwarderRows()...)
	if r.Big != nil {
		rows = append(rows, []string{fmt.Sprintf("engine, no-data-loss, %s records", fmtCount(r.Big.Records)),
			fmtNum(r.Big.Rate.RecordsPerSecond()), fmt.Sprintf("%.1f", r.Big.Rate.MBPerSecond()), "", fmt.Sprintf("%.2f", r.Big.CPUPerMillion), fmtBytes(r.Big.MaxRSS)})
	}
	for _, t := range r.Throttled {
		rows = append(rows, []string{fmt.Sprintf("engine, target throttled to %.1f MB/s, maxInFlightPerPartition %d", float64(t.BytesPerSecond)/1e6, t.MaxInFlightPerPartition),
			fmtNum(t.rate()), "", fmt.Sprintf("%d in flight (bound %d)", t.MaxInFlight, t.bound()), "", fmtBytes(t.MaxRSS)})
	}
	if l := r.Large; l != nil {
		rows = append(rows, []string{fmt.Sprintf("engine, %d KiB records, target throttled to %.1f MB/s, maxInFlightBytes %s", l.ValueSize>>10, float64(l.BytesPerSecond)/1e6, fmtBytes(l.MaxInFlightBytes)),
			fmtNum(l.rate()), "", fmt.Sprintf("%s in flight at most", fmtBytes(l.PeakInFlightBytes)), "", fmtBytes(l.MaxRSS)})
	}
	if l := r.Latency; l != nil {
		rows = append(rows, []string{fmt.Sprintf("replication latency at %d records/s: p50 / p99 / max", l.Rate),
			"", "", fmt.Sprintf("%.1f / %.1f / %.1f ms", l.P50Ms, l.P99Ms, l.MaxMs), "", ""})
	}
	rows = append(rows, r.exactlyOnceRows()...)
	return rows
}

// write stores results.json and results.md in dir.
func (r *report) write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("while creating %s: %w", dir, err)
	}
	js, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("while encoding the results: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(js, '\n'), 0o644); err != nil {
		return fmt.Errorf("while writing results.json: %w", err)
	}
	var md strings.Builder
	r.markdown(&md)
	if err := os.WriteFile(filepath.Join(dir, "results.md"), []byte(md.String()), 0o644); err != nil {
		return fmt.Errorf("while writing results.md: %w", err)
	}
	return nil
}

// markdown renders the report for docs/benchmarks/results.md.
func (r *report) markdown(w io.Writer) {
	s := r.Settings
	fmt.Fprintf(w, "# Benchmark results\n\n")
	fmt.Fprintf(w, "Written by `make bench` (hack/bench); see [README.md](README.md) for how to read it.\n\n")
	fmt.Fprintf(w, "| | |\n|---|---|\n")
	fmt.Fprintf(w, "| date | %s |\n| commit | `%s` |\n| machine | %d cores, %s, %s/%s |\n| Go | %s |\n| run time | %.0f s |\n",
		r.Date, r.Commit, r.Cores, r.CPUModel, r.OS, r.Arch, r.GoVersion, r.Seconds)
	fmt.Fprintf(w, "| workload | %s records, %d-byte values, %d-byte keys, %d headers, %d partitions, %d brokers per kfake cluster, %d round(s)%s |\n\n",
		fmtCount(s.Records), s.ValueSize, s.KeyBytes, s.HeadersPerRecord, s.Partitions, s.Brokers, s.Rounds, map[bool]string{true: ", --quick"}[s.Quick])
	if len(s.EngineEnv) > 0 {
		fmt.Fprintf(w, "Engine environment: `%s`.\n\n", strings.Join(s.EngineEnv, " "))
	}

	fmt.Fprintf(w, "## Results\n\n")
	rows := r.tableRows()
	writeMarkdownTable(w, rows)
	if len(r.Targets) > 0 {
		fmt.Fprintf(w, "\n## Targets\n\n")
		t := [][]string{{"target", "goal", "measured", "met"}}
		for _, x := range r.Targets {
			t = append(t, []string{x.Name, x.Goal, x.Value, yesNo(x.Met)})
		}
		writeMarkdownTable(w, t)
	}
	if len(r.Rounds) > 0 {
		fmt.Fprintf(w, "\n## Rounds\n\nEach round runs every throughput measurement once, starting one step later than the round before; the summary takes medians.\n\n")
		t := [][]string{{"round", "produce limit", "produce limit, noDataLoss: false", "consume limit", "raw pipe", "engine", "engine, noDataLoss: false", "engine, CEL filter", "engine / limit"}}
		for _, x := range r.Rounds {
			row := []string{fmt.Sprint(x.Round), fmtNum(x.ProduceLimit.Rate.RecordsPerSecond()), fmtNum(x.ProduceFastLimit.Rate.RecordsPerSecond()),
				fmtNum(x.ConsumeLimit.Rate.RecordsPerSecond()), fmtNum(x.Pipe.Rate.RecordsPerSecond()), "", "", "", ""}
			if x.Engine != nil {
				row[5], row[6], row[7] = fmtNum(x.Engine.Rate.RecordsPerSecond()), fmtNum(x.EngineFast.Rate.RecordsPerSecond()), fmtNum(x.EngineCEL.Rate.RecordsPerSecond())
				row[8] = fmt.Sprintf("%.2f", x.EngineToLimit)
			}
			t = append(t, row)
		}
		writeMarkdownTable(w, t)
	}
	r.forwarderMarkdown(w)
	if s := r.Summary.BytesPerInFlightRecord; s > 0 {
		fmt.Fprintf(w, "\n## Memory\n\nBetween the throttled runs, peak RSS grew by about %.0f bytes per record in flight (each record carries %d bytes of key and value).\n",
			s, r.Settings.KeyBytes+r.Settings.ValueSize)
	}
	if l := r.Latency; l != nil {
		fmt.Fprintf(w, "\n## Replication latency\n\n%d records at %d records/s over %d partitions, each stamped when sent to the source and timed when read back from the target.\n\n",
			l.Records, l.Rate, s.Partitions)
		t := [][]string{{"", "p50", "p90", "p99", "max"}, {"source produce -> target read (end to end)", fmtMs(l.P50Ms), fmtMs(l.P90Ms), fmtMs(l.P99Ms), fmtMs(l.MaxMs)}}
		if l.EngineP50Ms >= 0 {
			t = append(t, []string{"engine read -> target ack (kafka_mirror_replication_latency_seconds, bucket-interpolated)", fmtMs(l.EngineP50Ms), "", fmtMs(l.EngineP99Ms), ""})
		}
		writeMarkdownTable(w, t)
	}
	r.groupsMarkdown(w)
	r.exactlyOnceMarkdown(w)
	if p := r.Profile; p != nil {
		fmt.Fprintf(w, "\n## Profile\n\nCPU, allocation, half-way in-use heap and mutex profiles of one engine run (no-data-loss, %s records%s): `%s`, `%s`, `%s`, `%s` (not committed; `make bench PROFILE=1` writes them).\n\n",
			fmtCount(p.Records), map[bool]string{true: ", filter `" + p.Filter + "`"}[p.Filter != ""], p.CPUProfile, p.AllocProfile, p.HeapProfile, p.MutexProfile)
		if p.EngineBreakdown != nil && p.ForwarderBreakdown != nil {
			fmt.Fprintf(w, "The engine's and the bare forwarder's CPU profiles over the same %s records (`%s`), by the goroutine that spent the time (hack/bench/breakdown.go):\n\n",
				fmtCount(p.Records), p.ForwarderCPUProfile)
			breakdownMarkdown(w, *p.EngineBreakdown, *p.ForwarderBreakdown, p.Records)
			fmt.Fprintln(w)
		}
		if p.CPUTop != "" {
			fmt.Fprintf(w, "Top of the CPU profile:\n\n```\n%s\n```\n\n", p.CPUTop)
		}
		if p.AllocTop != "" {
			fmt.Fprintf(w, "Top of the allocation profile (alloc_space):\n\n```\n%s\n```\n\n", p.AllocTop)
		}
		if p.HeapTop != "" {
			fmt.Fprintf(w, "Top of the in-use heap half-way (inuse_space):\n\n```\n%s\n```\n\n", p.HeapTop)
		}
		if p.MutexTop != "" {
			fmt.Fprintf(w, "Top of the mutex contention profile (delay):\n\n```\n%s\n```\n", p.MutexTop)
		}
	}
}

func writeMarkdownTable(w io.Writer, rows [][]string) {
	for i, row := range rows {
		cells := make([]string, len(row))
		for j, c := range row {
			cells[j] = strings.ReplaceAll(c, "|", `\|`)
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
		if i == 0 {
			fmt.Fprintf(w, "|%s\n", strings.Repeat("---|", len(row)))
		}
	}
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func fmtRate(r rate) string {
	return fmt.Sprintf("%s records/s (%.1f MB/s)", fmtNum(r.RecordsPerSecond()), r.MBPerSecond())
}

// fmtNum writes a rate with thousands separators.
func fmtNum(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmtCount(int(v + 0.5))
}

func fmtCount(n int) string {
	s := fmt.Sprint(n)
	var out []byte
	for i := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

func fmtBytes(b int64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
}

func fmtMs(v float64) string { return fmt.Sprintf("%.1f ms", v) }

// gitCommit names the checkout measured, marked -dirty when it has changes.
func gitCommit() string {
	out, err := exec.Command("git", "describe", "--always", "--dirty", "--abbrev=12").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

func cpuModel() string {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return "unknown CPU"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "unknown CPU"
}
