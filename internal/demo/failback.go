package demo

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/audit"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/engineproc"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
)

// The failover scene: a mirror from cluster a to cluster b with an application group;
// a planned failover (`kafka-mirror failover`) moves the group to b; producers and the
// application work on b; `kafka-mirror failback` mirrors back exactly what was written
// to b after the cutover and moves the group back to a.
const (
	fbTopic      = "orders"
	fbPartitions = 4
	fbGroup      = "orders-app"
	// fbLimit bounds each wait of the scene (a mirror catching up, a checkpoint).
	fbLimit = 2 * time.Minute
)

// FailbackResult is what the failover scene found.
type FailbackResult struct {
	// There audits cluster b against every record produced (a's before the cutover,
	// b's after): each once. Back audits cluster a likewise after the failback.
	There, Back audit.Report
	// ReadOnB counts the records the application read on b after the failover (from
	// its translated offsets); ExpectedOnB what it had not read on a plus what was
	// written to b.
	ReadOnB, ExpectedOnB int64
	// GroupBack is the application group's offsets on a after the failback, EndBack
	// a's end offsets: equal when it skips nothing and reads nothing again.
	GroupBack, EndBack map[int32]int64
	// Elapsed is the scene's wall time up to the report.
	Elapsed time.Duration
}

// Err says which promise the scene broke, or nil.
func (r *FailbackResult) Err() error {
	var problems []string
	for name, rep := range map[string]audit.Report{"b after the failover": r.There, "a after the failback": r.Back} {
		if t := rep.Total; t.Lost > 0 || t.Duplicated > 0 || t.OutOfOrder > 0 || rep.Unknown > 0 {
			problems = append(problems, fmt.Sprintf("%s: %d lost, %d duplicated, %d out of order, %d unknown", name, t.Lost, t.Duplicated, t.OutOfOrder, rep.Unknown))
		}
	}
	if r.ReadOnB != r.ExpectedOnB {
		problems = append(problems, fmt.Sprintf("the application read %d records on b, want %d", r.ReadOnB, r.ExpectedOnB))
	}
	for p, end := range r.EndBack {
		if r.GroupBack[p] != end {
			problems = append(problems, fmt.Sprintf("the application group is at %d of partition %d on a after the failback, want its end %d", r.GroupBack[p], p, end))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("the failover scene broke its promise: %s", strings.Join(problems, "; "))
}

// fbSide is one cluster of the scene.
type fbSide struct {
	name    string
	brokers []string
	admin   sarama.ClusterAdmin
	client  sarama.Client
	kadm    *kadm.Client
	kc      *kgo.Client
}

// RunFailback plays the failover scene (see the comment above the constants).
func RunFailback(ctx context.Context, opts Options) (*FailbackResult, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	sc, err := newScene(opts, "kafka-mirror-demo-failover-")
	if err != nil {
		return nil, err
	}
	passed := false
	defer func() { sc.finish(passed) }()
	start, out, say, dir := sc.start, sc.out, sc.say, sc.dir
	log, err := os.OpenFile(filepath.Join(dir, "engines.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("while creating the engine log: %w", err)
	}
	defer log.Close()

	var a, b *fbSide
	var running *engineproc.Process
	defer func() {
		if running != nil {
			select {
			case <-running.Done():
			default:
				_ = running.Stop(aaStopLimit)
			}
		}
	}()
	for _, name := range []string{"a", "b"} {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ClusterID("demo-"+name))
		if err != nil {
			return nil, fmt.Errorf("while starting cluster %s: %w", name, err)
		}
		defer c.Close()
		s := &fbSide{name: name, brokers: c.ListenAddrs()}
		cl := config.Cluster{BootstrapServers: s.brokers, ClientID: "kafka-mirror-demo"}
		if s.admin, err = kafka.NewClusterAdmin(cl); err != nil {
			return nil, err
		}
		defer s.admin.Close()
		if s.client, err = kafka.NewClient(cl); err != nil {
			return nil, err
		}
		defer s.client.Close()
		if s.kc, err = kgo.NewClient(kgo.SeedBrokers(s.brokers...)); err != nil {
			return nil, err
		}
		defer s.kc.Close()
		s.kadm = kadm.NewClient(s.kc)
		if err := s.admin.CreateTopic(fbTopic, &sarama.TopicDetail{NumPartitions: fbPartitions, ReplicationFactor: 1}, false); err != nil {
			return nil, fmt.Errorf("while creating topic %q on %s: %w", fbTopic, name, err)
		}
		if name == "a" {
			a = s
		} else {
			b = s
		}
	}
	say("Started clusters a (%s) and b (%s), each with topic %s (%d partitions).", strings.Join(a.brokers, ","), strings.Join(b.brokers, ","), fbTopic, fbPartitions)

	half := max(fbPartitions, opts.Records/2)
	topics := map[string]int32{fbTopic: fbPartitions}
	there, err := audit.Produce(ctx, a.brokers, audit.Workload{Topics: topics, Records: half, Rate: opts.Rate, Seed: 1, Run: "a"}, nil)
	if err != nil || there.Failed > 0 {
		return nil, fmt.Errorf("while producing to a: %v (%d refused)", err, there.Failed)
	}
	// The application read half of each partition on a and committed.
	endsA, err := endOffsets(ctx, a)
	if err != nil {
		return nil, err
	}
	atA := kadm.Offsets{}
	for p, end := range endsA {
		atA.AddOffset(fbTopic, p, end/2, -1)
	}
	if _, err := a.kadm.CommitOffsets(ctx, fbGroup, atA); err != nil {
		return nil, fmt.Errorf("while committing %s on a: %w", fbGroup, err)
	}
	say("Produced %s records to a; application group %s read half of each partition there and stopped.", count(int64(half)), fbGroup)

	forward := filepath.Join(dir, "mirror-a-to-b.yaml")
	if err := writeFailbackConfig(forward, a, b, "kafka-mirror.demo.a-to-b", nil); err != nil {
		return nil, err
	}
	if running, err = startEngine(opts.Engine, forward, log); err != nil {
		return nil, err
	}
	say("Started the mirror a -> b: kafka-mirror run --config %s (groups: %s).", forward, fbGroup)
	if err := waitCaughtUp(ctx, a, b, "kafka-mirror.demo.a-to-b", running); err != nil {
		return nil, err
	}
	if err := running.Stop(aaStopLimit); err != nil {
		return nil, fmt.Errorf("while stopping the mirror a -> b: %w", err)
	}
	running = nil
	say("The mirror caught up; the producers stop writing to a, and the mirror is stopped (SIGTERM).")

	say("Planned failover: kafka-mirror failover --config %s --mode planned", forward)
	report, err := runCaptured(opts.Engine, log, "failover", "--config", forward, "--mode", "planned", "--timeout", "2m")
	fmt.Fprint(out, indent(report))
	if err != nil {
		return nil, fmt.Errorf("the failover failed: %w", err)
	}

	// The application moves to b: it resumes at its translated offsets.
	res := &FailbackResult{}
	for _, end := range endsA {
		res.ExpectedOnB += end - end/2
	}
	back, err := audit.Produce(ctx, b.brokers, audit.Workload{Topics: topics, Records: half, Rate: opts.Rate, Seed: 2, Run: "b"}, nil)
	if err != nil || back.Failed > 0 {
		return nil, fmt.Errorf("while producing to b: %v (%d refused)", err, back.Failed)
	}
	res.ExpectedOnB += int64(half)
	if res.ReadOnB, err = readToEnd(ctx, b, fbGroup); err != nil {
		return nil, err
	}
	say("The producers moved to b and wrote %s records; application group %s moved to b, resumed at its translated offsets and read %s records (the half it had not read on a, and b's new ones).",
		count(int64(half)), fbGroup, count(res.ReadOnB))

	reverse := filepath.Join(dir, "mirror-b-to-a.yaml")
	if err := writeFailbackConfig(reverse, b, a, "kafka-mirror.demo.b-to-a", &config.InitialPositions{FromFailover: "kafka-mirror.demo.a-to-b"}); err != nil {
		return nil, err
	}
	say("Failback: kafka-mirror failback --config %s --from kafka-mirror.demo.a-to-b", reverse)
	plan, err := runCaptured(opts.Engine, log, "failback", "--config", reverse, "--from", "kafka-mirror.demo.a-to-b", "--plan-only")
	fmt.Fprint(out, indent(plan))
	if err != nil {
		return nil, fmt.Errorf("the failback plan failed: %w", err)
	}
	running, err = engineproc.Start(opts.Engine("failback", "--config", reverse, "--from", "kafka-mirror.demo.a-to-b", "--log-format", "console"),
		engineproc.Options{Output: log})
	if err != nil {
		return nil, err
	}
	if err := waitCaughtUp(ctx, b, a, "kafka-mirror.demo.b-to-a", running); err != nil {
		return nil, err
	}
	if res.EndBack, err = endOffsets(ctx, a); err != nil {
		return nil, err
	}
	// The failback mirror's checkpoints move the group back to a.
	deadline := time.Now().Add(fbLimit)
	for {
		if res.GroupBack, err = groupOffsets(ctx, a, fbGroup); err == nil && sameOffsets(res.GroupBack, res.EndBack) {
			break
		}
		if time.Now().After(deadline) {
			break
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return nil, err
		}
	}
	if err := running.Stop(aaStopLimit); err != nil {
		return nil, fmt.Errorf("while stopping the failback mirror: %w", err)
	}
	running = nil
	say("The failback mirror copied b's new records to a and checkpointed %s there; stopped it. Auditing both clusters by record id...", fbGroup)

	all := &audit.Produced{}
	all.Merge(there)
	all.Merge(back)
	for _, side := range []struct {
		s   *fbSide
		rep *audit.Report
	}{{b, &res.There}, {a, &res.Back}} {
		m, err := audit.ReadAll(ctx, side.s.brokers, []string{fbTopic}, audit.ReadOptions{Timeout: time.Minute})
		if err != nil {
			return nil, fmt.Errorf("while reading %s back: %w", side.s.name, err)
		}
		// Copies carry the provenance header of the mirror that made them.
		*side.rep = audit.Audit(all, m, audit.Options{IgnoreContent: true})
	}
	res.Elapsed = time.Since(start)
	printFailbackReport(out, res)
	passed = true
	return res, nil
}

// writeFailbackConfig writes the config of a mirror from src to dst with group,
// checkpointing fbGroup, with provenance on.
func writeFailbackConfig(path string, src, dst *fbSide, group string, initial *config.InitialPositions) error {
	cfg := &config.Config{
		Source:               config.Cluster{BootstrapServers: src.brokers},
		Target:               config.Cluster{BootstrapServers: dst.brokers},
		ConsumerGroup:        group,
		Topics:               config.Topics{Include: []string{fbTopic}},
		OffsetCommitInterval: config.Duration{Duration: time.Second},
		TopicSyncInterval:    config.Duration{Duration: 2 * time.Second},
		Groups:               &config.Groups{Include: []string{fbGroup}, SyncInterval: config.Duration{Duration: time.Second}},
		Provenance:           &config.Provenance{Enabled: true},
		InitialPositions:     initial,
		Metrics:              config.Metrics{Address: "0"},
	}
	cfg.Default()
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("while validating the demo's mirror config: %w", err)
	}
	data, err := config.Marshal(cfg)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// waitCaughtUp waits until group committed every offset of fbTopic on src.
func waitCaughtUp(ctx context.Context, src, dst *fbSide, group string, engine *engineproc.Process) error {
	o := &observer{source: src.client, target: dst.client, sourceAdmin: src.admin, group: group, topics: []topicPair{{Source: fbTopic, Target: fbTopic}}}
	deadline := time.Now().Add(fbLimit)
	for {
		if states, err := o.snapshot(); err == nil && caughtUp(states) {
			return nil
		}
		select {
		case <-engine.Done():
			return fmt.Errorf("the engine %s -> %s exited on its own: %v", src.name, dst.name, engine.Err())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for the mirror %s -> %s to commit every record", fbLimit, src.name, dst.name)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// runCaptured runs `kafka-mirror args...` to its end and returns its standard output;
// its logs go to log.
func runCaptured(command EngineCommand, log io.Writer, args ...string) (string, error) {
	cmd := command(append(args, "--log-format", "console")...)
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, log
	err := cmd.Run()
	return stdout.String(), err
}

func indent(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		b.WriteString("    " + l + "\n")
	}
	return b.String()
}

func endOffsets(ctx context.Context, s *fbSide) (map[int32]int64, error) {
	ends, err := s.kadm.ListEndOffsets(ctx, fbTopic)
	if err != nil {
		return nil, fmt.Errorf("while reading the end offsets of %s on %s: %w", fbTopic, s.name, err)
	}
	out := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out, nil
}

func groupOffsets(ctx context.Context, s *fbSide, group string) (map[int32]int64, error) {
	offs, err := s.kadm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	offs.Each(func(o kadm.OffsetResponse) {
		if o.Topic == fbTopic && o.Err == nil {
			out[o.Partition] = o.At
		}
	})
	return out, nil
}

func sameOffsets(a, b map[int32]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for p, o := range b {
		if a[p] != o {
			return false
		}
	}
	return true
}

// readToEnd reads fbTopic on s as group from its committed offsets to the end, commits
// and returns how many records it read.
func readToEnd(ctx context.Context, s *fbSide, group string) (int64, error) {
	ends, err := endOffsets(ctx, s)
	if err != nil {
		return 0, err
	}
	client, err := kgo.NewClient(kgo.SeedBrokers(s.brokers...), kgo.ConsumerGroup(group), kgo.ConsumeTopics(fbTopic),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return 0, err
	}
	defer client.Close()
	// It resumes at its committed offsets (a partition without one starts at the beginning).
	next, err := groupOffsets(ctx, s, group)
	if err != nil {
		return 0, err
	}
	read := int64(0)
	deadline := time.Now().Add(fbLimit)
	for {
		done := true
		for p, end := range ends {
			done = done && next[p] >= end
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			return read, fmt.Errorf("group %s did not reach the end of %s on %s within %s", group, fbTopic, s.name, fbLimit)
		}
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := client.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			return read, ctx.Err()
		}
		fs.EachRecord(func(r *kgo.Record) {
			read++
			next[r.Partition] = r.Offset + 1
		})
	}
	if err := client.CommitUncommittedOffsets(ctx); err != nil {
		return read, fmt.Errorf("while committing %s on %s: %w", group, s.name, err)
	}
	return read, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

func printFailbackReport(out io.Writer, r *FailbackResult) {
	var b strings.Builder
	fmt.Fprintf(&b, "\nFailover and failback report (%.1fs)\n", r.Elapsed.Seconds())
	line := func(name string, n int64, note string) {
		fmt.Fprintf(&b, "  %-26s %10s  %s\n", name, count(n), note)
	}
	line("on b, each once", int64(r.There.Total.Mirrored), fmt.Sprintf("of %s produced on a and b (lost %d, duplicated %d)", count(int64(r.There.Total.Produced)), r.There.Total.Lost, r.There.Total.Duplicated))
	line("read by the app on b", r.ReadOnB, fmt.Sprintf("of %s it had not read (0 skipped, 0 read again when equal)", count(r.ExpectedOnB)))
	line("on a after failback, once", int64(r.Back.Total.Mirrored), fmt.Sprintf("of %s (lost %d, duplicated %d: none mirrored back twice)", count(int64(r.Back.Total.Produced)), r.Back.Total.Lost, r.Back.Total.Duplicated))
	var group, end int64
	for p, e := range r.EndBack {
		end += e
		group += r.GroupBack[p]
	}
	line("app group back on a", group, fmt.Sprintf("summed offsets; a's end is %s (nothing to read again, nothing skipped)", count(end)))
	if err := r.Err(); err != nil {
		fmt.Fprintf(&b, "\nFAILED: %v\n", err)
	} else {
		b.WriteString("\nPASSED: failed over and back; every record on both clusters exactly once, the application skipped nothing either way.\n")
	}
	_, _ = out.Write([]byte(b.String()))
}
