package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"golang.org/x/sync/errgroup"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/engineproc"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/realkafka"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// The mirrors of the real-Kafka comparison (--kafka real, issue 27).
const (
	realEngine    = "kafka-mirror"
	realForwarder = "sarama forwarder"
	realMM2       = "MirrorMaker 2"
	// The kill -9 test's exactly-once arms: the engine with delivery: exactlyOnce, and
	// MirrorMaker 2 with exactly.once.source.support=enabled (KIP-618). Their targets are
	// audited read_committed.
	realEngineEOS = "kafka-mirror, exactlyOnce"
	realMM2EOS    = "MirrorMaker 2, exactly.once.source.support"
)

// realArmNames are the names --real-arms takes, and the arm each one is.
var realArmNames = map[string]string{
	"kafka-mirror":     realEngine,
	"forwarder":        realForwarder,
	"mm2":              realMM2,
	"kafka-mirror-eos": realEngineEOS,
	"mm2-eos":          realMM2EOS,
}

// realArmFlagNames are the keys of realArmNames in the order the tables list the arms.
func realArmFlagNames() []string {
	return []string{"kafka-mirror", "forwarder", "mm2", "kafka-mirror-eos", "mm2-eos"}
}

// parseRealArms is --real-arms: arm names, comma-separated, each once.
func parseRealArms(s string) ([]string, error) {
	var out []string
	for _, name := range strings.Split(s, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		arm, ok := realArmNames[name]
		if !ok {
			return nil, fmt.Errorf("--real-arms: %q is none of %s", name, strings.Join(realArmFlagNames(), ", "))
		}
		if slicesContainsAny(out, []string{arm}) {
			return nil, fmt.Errorf("--real-arms: %q is listed twice", name)
		}
		out = append(out, arm)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--real-arms: no arm in %q", s)
	}
	return out, nil
}

// exactlyOnceArm tells the arms whose target holds transactions: counted and audited
// read_committed.
func exactlyOnceArm(arm string) bool { return arm == realEngineEOS || arm == realMM2EOS }

// mm2File is the base name of the comparison's results in --out.
const mm2File = "mm2-results"

// realResult is one arm's run on the real clusters.
type realResult struct {
	Arm   string `json:"arm"`
	Round int    `json:"round"`
	engineResult
	// MirrorCPUPerMillion is the CPU time from the first record on the target to the last,
	// per million records copied meanwhile: CPUPerMillion without the process's start
	// (for a JVM, class loading and most of the JIT compilation) and stop.
	MirrorCPUPerMillion float64 `json:"mirrorCPUSecondsPerMillionRecords"`
	Audit               audit   `json:"audit"`
}

// cpuSampler is a recordCounter that also reads the CPU time of the process pid each
// time the target holds records: at the first record and at the last.
type cpuSampler struct {
	recordCounter
	pid               int
	firstN, lastN     int64
	firstCPU, lastCPU time.Duration
}

func (c *cpuSampler) count() (int64, time.Time, error) {
	n, at, err := c.recordCounter.count()
	if err != nil || n == 0 {
		return n, at, err
	}
	if cpu, err := procCPU(c.pid); err == nil {
		if c.firstN == 0 {
			c.firstN, c.firstCPU = n, cpu
		}
		c.lastN, c.lastCPU = n, cpu
	}
	return n, at, nil
}

// perMillion is the CPU seconds per million records between the first and the last sample.
func (c *cpuSampler) perMillion() float64 {
	if c.lastN <= c.firstN {
		return 0
	}
	return (c.lastCPU - c.firstCPU).Seconds() / float64(c.lastN-c.firstN) * 1e6
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's CPU times (100 on
// every Linux architecture the benchmark runs on).
const clockTicks = 100

// procCPU is the user plus system CPU time of process pid (all its threads) so far,
// from /proc/<pid>/stat.
func procCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseProcStatCPU(string(data))
}

// parseProcStatCPU reads utime and stime (fields 14 and 15) from a /proc/<pid>/stat
// line. The command name (field 2) is in parentheses and may hold spaces, so the fields
// are counted from the last ')'.
func parseProcStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("no command name in %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state): utime is field 14, f[11]; stime f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("only %d fields after the command name in %q", len(f), stat)
	}
	var ticks int64
	for _, s := range f[11:13] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("CPU time %q: %w", s, err)
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// audit is what a read of the whole target topic found against the source's records.
type audit struct {
	// Read is how many records the target topic held; Distinct how many of the source's
	// records were among them.
	Read     int64 `json:"read"`
	Distinct int64 `json:"distinct"`
	// Missing are source records not on the target; Duplicates are copies beyond the first.
	Missing    int64 `json:"missing"`
	Duplicates int64 `json:"duplicates"`
	// Foreign are records without a sequence header of this run's range.
	Foreign int64 `json:"foreign"`
}

func (a audit) String() string {
	return fmt.Sprintf("%d read, %d distinct, %d missing, %d duplicates", a.Read, a.Distinct, a.Missing, a.Duplicates)
}

// killResult is the kill -9 test of one arm: killed when half the records were on the
// target, restarted, and audited once the target held them all and stopped growing.
type killResult struct {
	Arm          string  `json:"arm"`
	KilledAt     int64   `json:"killedAtTargetRecords"`
	Audit        audit   `json:"audit"`
	RecoverySecs float64 `json:"secondsFromRestartToLastRecord"`
}

// realReport is mm2-results.json.
type realReport struct {
	Date         string            `json:"date"`
	Commit       string            `json:"commit"`
	CPU          string            `json:"cpu"`
	Cores        int               `json:"cores"`
	KafkaVersion string            `json:"kafkaVersion"`
	MM2Version   string            `json:"mirrorMakerVersion"`
	MM2Heap      string            `json:"mirrorMakerHeap"`
	MM2Props     map[string]string `json:"mirrorMakerExtraProperties,omitempty"`
	Brokers      int               `json:"brokersPerCluster"`
	Records      int               `json:"records"`
	ValueSize    int               `json:"valueSize"`
	Partitions   int               `json:"partitions"`
	Rounds       int               `json:"rounds"`
	Runs         []realResult      `json:"runs"`
	Kill         []killResult      `json:"kill9,omitempty"`
}

// realBench is the state of the real-Kafka comparison.
type realBench struct {
	*bench
	source, target *realkafka.Cluster
	mm2Jars        string
}

// realKafka is --kafka real: two single-broker Apache Kafka clusters (JVMs from the
// jars of hack/kafka.sh), the source topic preloaded once, and the engine, the bare
// forwarder and MirrorMaker 2 mirroring it in alternating rounds into a target topic
// that is re-created empty before each run.
func (b *bench) realKafka(ctx context.Context) error {
	jars, err := mm2Jars()
	if err != nil {
		return err
	}
	bin, err := b.buildEngine(ctx)
	if err != nil {
		return err
	}
	b.engineBin = []string{bin}
	rb := &realBench{bench: b, mm2Jars: jars}
	defer rb.closeClusters()
	b.logf("Starting two Apache Kafka %s clusters of %d broker(s)", realkafka.Version, b.o.realBrokers)
	if err := rb.startClusters(ctx); err != nil {
		return err
	}
	if _, err := rb.source.Admin().CreateTopic(ctx, int32(b.o.partitions), int16(b.o.realBrokers), nil, dataTopic); err != nil {
		return fmt.Errorf("while creating source topic %s: %w", dataTopic, err)
	}
	b.srcBrokers = rb.source.Addrs()
	b.logf("Preloading %d records of %d bytes into %d partitions", b.o.records, b.o.valueSize, b.o.partitions)
	d, err := preload(ctx, b.srcBrokers, b.gen, dataTopic, int32(b.o.partitions), 0, b.o.records)
	if err != nil {
		return err
	}
	b.logf("Preloaded in %s (%.0f records/s)", d.Round(time.Millisecond), float64(b.o.records)/d.Seconds())

	rep := realReport{
		Date: time.Now().UTC().Format(time.RFC3339), Commit: gitCommit(), CPU: cpuModel(), Cores: numCPU(),
		KafkaVersion: realkafka.Version, MM2Version: mm2Version, MM2Heap: "-Xms" + mm2HeapMin + " -Xmx" + b.o.mm2Heap,
		MM2Props: b.o.mm2Props, Brokers: b.o.realBrokers, Records: b.o.records, ValueSize: b.o.valueSize, Partitions: b.o.partitions, Rounds: b.o.rounds,
	}
	for i := range b.o.rounds {
		for j := range b.o.realArms {
			arm := b.o.realArms[(i+j)%len(b.o.realArms)]
			res, err := rb.throughput(ctx, arm)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", i+1, arm, err)
			}
			res.Round = i + 1
			rep.Runs = append(rep.Runs, res)
		}
	}
	if b.o.realKill {
		arms := []string{realEngine, realMM2}
		if b.o.realKillEOS {
			arms = append(arms, realEngineEOS, realMM2EOS)
		}
		for _, arm := range arms {
			res, err := rb.kill9(ctx, arm)
			if err != nil {
				return fmt.Errorf("kill -9 of %s: %w", arm, err)
			}
			rep.Kill = append(rep.Kill, res)
		}
	}
	writeRealMarkdown(os.Stdout, rep)
	return writeRealReport(b.o.out, rep)
}

func (rb *realBench) startClusters(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	var g errgroup.Group
	for _, c := range []**realkafka.Cluster{&rb.source, &rb.target} {
		name := map[bool]string{true: "source", false: "target"}[c == &rb.source]
		g.Go(func() error {
			cl, err := realkafka.Start(ctx, rb.workDir, realkafka.Options{Name: name, Brokers: rb.o.realBrokers})
			if err != nil {
				return err
			}
			*c = cl
			return nil
		})
	}
	return g.Wait()
}

func (rb *realBench) closeClusters() {
	for _, c := range []*realkafka.Cluster{rb.source, rb.target} {
		if c != nil {
			c.Close()
		}
	}
}

// resetTarget deletes the target topic and MirrorMaker's internal topics, if there are
// any, and creates the target topic empty with the source's partition count: every run
// starts from an empty target and MirrorMaker from no stored source offsets.
func (rb *realBench) resetTarget(ctx context.Context) error {
	adm := rb.target.Admin()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	drop := append([]string{dataTopic}, mm2InternalTopics()...)
	if _, err := adm.DeleteTopics(ctx, drop...); err != nil {
		return fmt.Errorf("while deleting the target topics: %w", err)
	}
	for {
		resp, err := adm.CreateTopic(ctx, int32(rb.o.partitions), int16(rb.o.realBrokers), nil, dataTopic)
		if err == nil && resp.Err == nil {
			break
		}
		if err == nil {
			err = resp.Err
		}
		// A deleted topic's name is free only once the deletion completed.
		if !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("while creating the target topic: %w", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("while re-creating the target topic: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	// The other topics must be gone as well before MirrorMaker starts.
	for {
		tds, err := adm.ListTopics(ctx)
		if err == nil && !slicesContainsAny(tds.Names(), mm2InternalTopics()) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("while waiting for MirrorMaker's internal topics to go: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// armFileName is arm as a part of a file name: "MirrorMaker 2, exactly.once.source.support"
// is "mirrormaker-2-exactly.once.source.support".
func armFileName(arm string) string {
	return strings.Join(strings.Fields(strings.ToLower(strings.ReplaceAll(arm, ",", ""))), "-")
}

func numCPU() int { return runtime.NumCPU() }

func slicesContainsAny(have, want []string) bool {
	for _, w := range want {
		for _, h := range have {
			if h == w {
				return true
			}
		}
	}
	return false
}

// start starts arm mirroring the data topic into the target, as the run named run.
// Every arm is a child process, measured alike: CPU time from the kernel once it
// exited, peak RSS (VmHWM) from /proc.
func (rb *realBench) start(arm, run string) (*engineproc.Process, error) {
	target := rb.target.Addrs()
	spec := engineSpec{name: run, noDataLoss: true, streams: rb.o.streams, maxInFlight: rb.o.maxInFlight}
	switch arm {
	case realEngine, realEngineEOS:
		if arm == realEngineEOS {
			spec.delivery = config.DeliveryExactlyOnce
		}
		p, _, err := rb.launch(rb.engineBin, spec, run, dataTopic, target)
		return p, err
	case realForwarder:
		self, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("while locating the benchmark binary: %w", err)
		}
		p, _, err := rb.launch([]string{self, forwarderCommand}, spec, run, dataTopic, target)
		return p, err
	case realMM2, realMM2EOS:
		return rb.startMM2(rb.runName(run), mm2Spec{source: rb.srcBrokers, target: target, topic: dataTopic, partitions: rb.o.partitions,
			exactlyOnce: arm == realMM2EOS, replicationFactor: rb.o.realBrokers, extra: rb.o.mm2Props})
	}
	return nil, fmt.Errorf("unknown arm %q", arm)
}

// startMM2 writes mm2.properties and the log4j config for run name into the work
// directory and starts MirrorMaker 2 in dedicated mode.
func (rb *realBench) startMM2(name string, spec mm2Spec) (*engineproc.Process, error) {
	props := filepath.Join(rb.workDir, name+".properties")
	if err := os.WriteFile(props, []byte(renderJavaProperties(mm2Properties(spec))), 0o600); err != nil {
		return nil, fmt.Errorf("while writing %s: %w", props, err)
	}
	log4j := filepath.Join(rb.workDir, "mm2-log4j2.properties")
	if err := os.WriteFile(log4j, []byte(mm2Log4j), 0o644); err != nil {
		return nil, err
	}
	java := "java"
	if home := os.Getenv("JAVA_HOME"); home != "" {
		java = filepath.Join(home, "bin", "java")
	}
	cmd := exec.Command(java, mm2JVMArgs(rb.o.mm2Heap, rb.mm2Jars, log4j, props)...)
	p, err := engineproc.Start(cmd, engineproc.Options{LogPath: filepath.Join(rb.workDir, name+".log")})
	if err != nil {
		return nil, fmt.Errorf("while starting MirrorMaker 2: %w", err)
	}
	return p, nil
}

// stop stops p with SIGTERM: the JVM runs its shutdown hooks and exits with 143, which
// is a clean stop for it.
func stopArm(arm string, p *engineproc.Process) usage {
	u := stopEngine(p, syscall.SIGTERM, time.Minute)
	if strings.HasPrefix(arm, realMM2) && p.ExitCode() == 128+int(syscall.SIGTERM) {
		u.ExitErr = nil
	}
	return u
}

// throughput runs arm once over the preloaded records into an empty target topic and
// audits the target.
func (rb *realBench) throughput(ctx context.Context, arm string) (realResult, error) {
	rb.seq++
	run := armFileName(arm)
	res := realResult{Arm: arm, engineResult: engineResult{Name: arm, Records: rb.o.records}}
	if err := rb.resetTarget(ctx); err != nil {
		return res, err
	}
	// A transactional target's end offsets also count the transaction markers and the
	// records of open transactions: the exactly-once arms are counted by a read_committed
	// consumer instead (in the benchmark's process, on the same cores).
	var counter interface {
		recordCounter
		close()
	}
	var err error
	if exactlyOnceArm(arm) {
		counter, err = newCommittedCounter(rb.target.Addrs(), dataTopic)
	} else {
		counter, err = newTargetCounter(rb.target.Addrs(), dataTopic, int32(rb.o.partitions))
	}
	if err != nil {
		return res, err
	}
	defer counter.close()
	p, err := rb.start(arm, run)
	if err != nil {
		return res, err
	}
	sampler := &cpuSampler{recordCounter: counter, pid: p.Pid()}
	wctx, cancel := context.WithTimeout(ctx, rb.runTimeout(rb.o.records))
	pr, err := waitForRecords(wctx, p, sampler, int64(rb.o.records), false, nil)
	cancel()
	if err != nil {
		stopEngine(p, syscall.SIGKILL, 5*time.Second)
		return res, fmt.Errorf("while waiting for the %s run (log %s): %w", arm, p.LogPath(), err)
	}
	u := stopArm(arm, p)
	if u.ExitErr != nil {
		return res, fmt.Errorf("%s did not stop cleanly: %w; last log lines:\n%s", arm, u.ExitErr, p.LogTail(logTailLines))
	}
	res.fill(pr, u, int64(rb.gen.recordBytes(0)))
	res.MirrorCPUPerMillion = sampler.perMillion()
	if res.Audit, err = rb.audit(ctx, rb.o.records); err != nil {
		return res, err
	}
	if res.Audit.Missing != 0 || res.Audit.Duplicates != 0 || res.Audit.Foreign != 0 {
		return res, fmt.Errorf("the %s run's target does not hold every record exactly once: %s", arm, res.Audit)
	}
	rb.logf("  %s: %s, %.2f CPU s per million records (%.2f from the first record to the last), peak RSS %s, first record after %.1f s; audit: %s",
		arm, fmtRate(res.Rate), res.CPUPerMillion, res.MirrorCPUPerMillion, fmtBytes(res.MaxRSS), res.StartupSeconds, res.Audit)
	return res, nil
}

// kill9 runs arm, kills it with SIGKILL when half of the records are on the target,
// starts it again with the same configuration (the same group, or MirrorMaker's stored
// offsets), waits until the target holds at least every record and has stopped growing,
// and audits it: at-least-once allows duplicates, never a missing record.
func (rb *realBench) kill9(ctx context.Context, arm string) (killResult, error) {
	rb.seq++
	run := armFileName(arm) + "-kill"
	res := killResult{Arm: arm}
	if err := rb.resetTarget(ctx); err != nil {
		return res, err
	}
	counter, err := newTargetCounter(rb.target.Addrs(), dataTopic, int32(rb.o.partitions))
	if err != nil {
		return res, err
	}
	defer counter.close()
	want := int64(rb.o.records)
	p, err := rb.start(arm, run)
	if err != nil {
		return res, err
	}
	wctx, cancel := context.WithTimeout(ctx, rb.runTimeout(rb.o.records))
	defer cancel()
	if _, err := waitForRecords(wctx, p, counter, want/2, true, nil); err != nil {
		stopEngine(p, syscall.SIGKILL, 5*time.Second)
		return res, fmt.Errorf("before the kill (log %s): %w", p.LogPath(), err)
	}
	_ = p.Kill()
	res.KilledAt, _ = counter.sum()
	rb.logf("  %s killed -9 with %d records on the target; restarting it", arm, res.KilledAt)
	restarted := time.Now()
	// The same run name (rb.seq is unchanged): the engine's config (and group) and
	// MirrorMaker's properties are written again identical.
	p, err = rb.start(arm, run)
	if err != nil {
		return res, err
	}
	if _, err := waitForRecords(wctx, p, counter, want, true, nil); err != nil {
		stopEngine(p, syscall.SIGKILL, 5*time.Second)
		return res, fmt.Errorf("after the restart (log %s): %w", p.LogPath(), err)
	}
	// Wait until the target stops growing: a restarted at-least-once mirror re-sends what
	// it had not committed, and may still be doing so when the count passes want.
	last, stableSince := int64(-1), time.Now()
	for time.Since(stableSince) < 5*time.Second {
		select {
		case <-wctx.Done():
			stopEngine(p, syscall.SIGKILL, 5*time.Second)
			return res, wctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
		n, err := counter.sum()
		if err != nil {
			continue
		}
		if n != last {
			last, stableSince = n, time.Now()
			res.RecoverySecs = time.Since(restarted).Seconds()
		}
	}
	// The end offsets also count transaction markers, so a transactional target can pass
	// want before every record is there: audit until none is missing, or a generous while.
	for deadline := time.Now().Add(2 * time.Minute); ; {
		if res.Audit, err = rb.audit(ctx, rb.o.records); err != nil {
			stopEngine(p, syscall.SIGKILL, 5*time.Second)
			return res, err
		}
		if res.Audit.Missing == 0 || time.Now().After(deadline) {
			break
		}
		rb.logf("  %s: %d records still missing, waiting", arm, res.Audit.Missing)
		time.Sleep(5 * time.Second)
	}
	if u := stopArm(arm, p); u.ExitErr != nil {
		return res, fmt.Errorf("%s did not stop cleanly after the restart: %w", arm, u.ExitErr)
	}
	rb.logf("  %s kill -9: %s", arm, res.Audit)
	if res.Audit.Missing != 0 {
		return res, fmt.Errorf("%s lost %d records across kill -9", arm, res.Audit.Missing)
	}
	return res, nil
}

// audit reads the whole target topic and checks it against records 0 to n-1 of the
// source, by the sequence number each record carries in its bench-seq header.
func (rb *realBench) audit(ctx context.Context, n int) (audit, error) {
	var a audit
	adm := rb.target.Admin()
	ends, err := adm.ListEndOffsets(ctx, dataTopic)
	if err != nil {
		return a, fmt.Errorf("while reading the target's end offsets: %w", err)
	}
	remaining := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			remaining[o.Partition] = o.Offset
		}
	})
	// read_committed, as a consumer of an exactly-once target reads it; the control
	// records (transaction markers) are kept so that the offset of a partition's last
	// one tells that the partition was read to its end.
	cl, err := kgo.NewClient(kgo.SeedBrokers(rb.target.Addrs()...), kgo.ConsumeTopics(dataTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(64<<20),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	if err != nil {
		return a, err
	}
	defer cl.Close()
	seen := make([]uint8, n)
	actx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for len(remaining) > 0 {
		fs := cl.PollFetches(actx)
		if err := actx.Err(); err != nil {
			return a, fmt.Errorf("while auditing the target (%d partitions unread): %w", len(remaining), err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return a, fmt.Errorf("while auditing the target: %w", ferr)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset+1 >= remaining[r.Partition] {
				delete(remaining, r.Partition)
			}
			if r.Attrs.IsControl() {
				return
			}
			a.Read++
			seq := int64(-1)
			for _, h := range r.Headers {
				if h.Key == headerSeq && len(h.Value) == 8 {
					seq = int64(binary.BigEndian.Uint64(h.Value))
				}
			}
			if seq < 0 || seq >= int64(n) {
				a.Foreign++
				return
			}
			if seen[seq] > 0 {
				a.Duplicates++
			} else {
				a.Distinct++
			}
			seen[seq] = 1
		})
	}
	a.Missing = int64(n) - a.Distinct
	return a, nil
}

// realSummary is one arm's medians over the rounds.
type realSummary struct {
	Arm           string
	Rate          float64 // records/s, first to last record
	MBps          float64
	CPUPerMillion float64
	MirrorCPU     float64
	MaxRSS        float64
	Startup       float64
	Runs          int
	Audited       int64
}

func summarizeReal(runs []realResult) []realSummary {
	var out []realSummary
	for _, name := range realArmFlagNames() {
		arm := realArmNames[name]
		var rs []realResult
		for _, r := range runs {
			if r.Arm == arm {
				rs = append(rs, r)
			}
		}
		if len(rs) == 0 {
			continue
		}
		s := realSummary{Arm: arm, Runs: len(rs)}
		s.Rate = medianOf(rs, func(r realResult) float64 { return r.Rate.RecordsPerSecond() })
		s.MBps = medianOf(rs, func(r realResult) float64 { return r.Rate.MBPerSecond() })
		s.CPUPerMillion = medianOf(rs, func(r realResult) float64 { return r.CPUPerMillion })
		s.MirrorCPU = medianOf(rs, func(r realResult) float64 { return r.MirrorCPUPerMillion })
		s.MaxRSS = medianOf(rs, func(r realResult) float64 { return float64(r.MaxRSS) })
		s.Startup = medianOf(rs, func(r realResult) float64 { return r.StartupSeconds })
		for _, r := range rs {
			s.Audited += r.Audit.Distinct
		}
		out = append(out, s)
	}
	return out
}

// writeRealMarkdown renders the comparison: the medians per arm, each run, and the
// kill -9 test.
func writeRealMarkdown(w io.Writer, rep realReport) {
	brokers := "one per cluster"
	if rep.Brokers == 3 {
		brokers = "three per cluster, replication factor 3, min.insync.replicas 2"
	}
	fmt.Fprintf(w, "Apache Kafka %s brokers (%s), MirrorMaker 2 %s (%s), %s records of %d bytes in %d partitions, %d rounds; %s, %d cores; commit %s, %s.\n\n",
		rep.KafkaVersion, brokers, rep.MM2Version, rep.MM2Heap, fmtCount(rep.Records), rep.ValueSize, rep.Partitions, rep.Rounds, rep.CPU, rep.Cores, rep.Commit, rep.Date)
	if len(rep.MM2Props) > 0 {
		fmt.Fprintf(w, "MirrorMaker 2 with these properties added: %s.\n\n", strings.Join(strings.Fields(renderJavaProperties(rep.MM2Props)), ", "))
	}
	rows := [][]string{{"mirror", "records/s", "MB/s", "CPU s / million records (process life)", "CPU s / million records (first to last record)", "peak RSS", "start to first record", "audit (every round)"}}
	for _, s := range summarizeReal(rep.Runs) {
		rows = append(rows, []string{s.Arm, fmt.Sprintf("%.0f", s.Rate), fmt.Sprintf("%.1f", s.MBps), fmt.Sprintf("%.2f", s.CPUPerMillion), fmt.Sprintf("%.2f", s.MirrorCPU),
			fmtBytes(int64(s.MaxRSS)), fmt.Sprintf("%.1f s", s.Startup), fmt.Sprintf("%s of %s records, 0 missing, 0 duplicates", fmtCount(int(s.Audited)), fmtCount(rep.Records*s.Runs))})
	}
	fmt.Fprintln(w, "Medians over the rounds:")
	fmt.Fprintln(w)
	writeMarkdownTable(w, rows)
	fmt.Fprintln(w)
	rows = [][]string{{"round", "mirror", "records/s", "CPU s / million (life)", "CPU s / million (first to last)", "peak RSS", "start to first record", "audit"}}
	for _, r := range rep.Runs {
		rows = append(rows, []string{fmt.Sprint(r.Round), r.Arm, fmt.Sprintf("%.0f", r.Rate.RecordsPerSecond()), fmt.Sprintf("%.2f", r.CPUPerMillion), fmt.Sprintf("%.2f", r.MirrorCPUPerMillion),
			fmtBytes(r.MaxRSS), fmt.Sprintf("%.1f s", r.StartupSeconds), r.Audit.String()})
	}
	fmt.Fprintln(w, "Every run, in the order run:")
	fmt.Fprintln(w)
	writeMarkdownTable(w, rows)
	if len(rep.Kill) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "kill -9 when half the records were on the target, then a restart:")
		fmt.Fprintln(w)
		rows = [][]string{{"mirror", "killed at", "missing", "duplicates (read_committed)", "restart to last record"}}
		for _, k := range rep.Kill {
			rows = append(rows, []string{k.Arm, fmtCount(int(k.KilledAt)), fmt.Sprint(k.Audit.Missing), fmt.Sprint(k.Audit.Duplicates), fmt.Sprintf("%.1f s", k.RecoverySecs)})
		}
		writeMarkdownTable(w, rows)
	}
}

// writeRealReport writes mm2-results.json and mm2-results.md into dir.
func writeRealReport(dir string, rep realReport) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, mm2File+".json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	var md strings.Builder
	writeRealMarkdown(&md, rep)
	if err := os.WriteFile(filepath.Join(dir, mm2File+".md"), []byte(md.String()), 0o644); err != nil {
		return err
	}
	fmt.Printf("Wrote %s and %s\n", filepath.Join(dir, mm2File+".json"), filepath.Join(dir, mm2File+".md"))
	return nil
}

// committedCounter counts the records a read_committed consumer of the whole target
// topic has read: what a reader of an exactly-once target sees, without the
// transaction markers and open transactions its end offsets hold.
type committedCounter struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
	n      atomic.Int64
}

func newCommittedCounter(brokers []string, topic string) (*committedCounter, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxBytes(64<<20),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(pollInterval))
	if err != nil {
		return nil, fmt.Errorf("while connecting the read_committed target counter: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &committedCounter{cl: cl, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			var n int64
			fs.EachRecord(func(*kgo.Record) { n++ })
			c.n.Add(n)
		}
	}()
	return c, nil
}

func (c *committedCounter) count() (int64, time.Time, error) { return c.n.Load(), time.Now(), nil }

func (c *committedCounter) close() {
	c.cancel()
	<-c.done
	c.cl.Close()
}
