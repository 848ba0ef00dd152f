package demo

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"golang.org/x/sync/errgroup"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/audit"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/engineproc"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
)

// The active-active scene: two data centres, each producing to its own copy of one
// topic, each mirroring into the other under the same name with loop prevention on.
const (
	aaTopic      = "orders"
	aaPartitions = 4
	// aaCaughtUpLimit bounds the wait for both mirrors to commit everything.
	aaCaughtUpLimit = 2 * time.Minute
	// aaStopLimit bounds an engine's drain on SIGTERM.
	aaStopLimit = 30 * time.Second
)

// aaSides are the two clusters' names, which are also their cluster ids and the runs of
// their workloads (record ids "<topic>/<partition>/<run>.<seq>").
var aaSides = [2]string{"dc1", "dc2"}

// ActiveActiveResult is what the active-active scene found on each cluster.
type ActiveActiveResult struct {
	// Sides holds one entry per cluster, dc1 then dc2.
	Sides [2]SideResult
	// Elapsed is the scene's wall time up to the report.
	Elapsed time.Duration
}

// SideResult is one cluster's audit: the records produced on it, and the copies of the
// other cluster's records that its peer's mirror wrote into it.
type SideResult struct {
	// Name is the cluster's name and id (dc1, dc2).
	Name string
	// Own audits the records produced on this cluster against what it holds of them: a
	// copy beyond the first is one that came back (a loop).
	Own audit.Report
	// Peer audits the other cluster's records against their copies here.
	Peer audit.Report
	// Unknown counts records here that neither workload produced.
	Unknown int
	// LoopDropped is what the mirror reading this cluster dropped as coming from its
	// target (kafka_mirror_loop_dropped_records_total).
	LoopDropped float64
}

// Err says which promise the scene broke, or nil: every record on each cluster exactly
// once, nothing lost, nothing looped back, order kept.
func (r *ActiveActiveResult) Err() error {
	var problems []string
	for _, s := range r.Sides {
		for _, part := range []struct {
			what string
			rep  audit.Report
		}{{"its own", s.Own}, {"its peer's", s.Peer}} {
			t := part.rep.Total
			if t.Lost > 0 || t.Duplicated > 0 || t.OutOfOrder > 0 || t.WrongPartition > 0 {
				problems = append(problems, fmt.Sprintf("%s holds %s records with %d lost, %d duplicated (looped), %d out of order, %d in the wrong partition",
					s.Name, part.what, t.Lost, t.Duplicated, t.OutOfOrder, t.WrongPartition))
			}
		}
		if s.Unknown > 0 {
			problems = append(problems, fmt.Sprintf("%s holds %d records nobody produced", s.Name, s.Unknown))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("the mirrors broke their promise: %s", strings.Join(problems, "; "))
}

// aaSide is one cluster of the scene and the engine that reads from it.
type aaSide struct {
	name        string
	brokers     []string
	admin       sarama.ClusterAdmin
	client      sarama.Client
	configPath  string
	metricsAddr string
	group       string
	engine      *engineproc.Process
	produced    *audit.Produced
	loopDropped float64
}

// RunActiveActive plays the active-active scene: clusters dc1 and dc2 each hold the
// topic orders; two engines run as child processes, dc1 -> dc2 and dc2 -> dc1, with the
// same topic names and `provenance: {enabled: true}`; producers write to both clusters
// at once. Once both engines have committed everything they are stopped with SIGTERM
// and each cluster is audited by record id: its own records exactly once (a second copy
// would have come back through the loop) and the other cluster's exactly once.
func RunActiveActive(ctx context.Context, opts Options) (*ActiveActiveResult, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	sc, err := newScene(opts, "kafka-mirror-demo-aa-")
	if err != nil {
		return nil, err
	}
	passed := false
	defer func() { sc.finish(passed) }()
	start, out, say, dir := sc.start, sc.out, sc.say, sc.dir
	var sides [2]*aaSide
	var kc [2]*kfake.Cluster
	defer func() {
		for i, s := range sides {
			if s == nil {
				continue
			}
			if s.engine != nil {
				select {
				case <-s.engine.Done():
				default:
					_ = s.engine.Stop(aaStopLimit)
				}
			}
			for _, c := range []interface{ Close() error }{s.admin, s.client} {
				if c != nil {
					_ = c.Close()
				}
			}
			if kc[i] != nil {
				kc[i].Close()
			}
		}
	}()

	for i, name := range aaSides {
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ClusterID(name))
		if err != nil {
			return nil, fmt.Errorf("while starting cluster %s: %w", name, err)
		}
		kc[i] = c
		s := &aaSide{name: name, brokers: c.ListenAddrs()}
		sides[i] = s
		cl := config.Cluster{BootstrapServers: s.brokers, ClientID: "kafka-mirror-demo"}
		if s.admin, err = kafka.NewClusterAdmin(cl); err != nil {
			return nil, err
		}
		if s.client, err = kafka.NewClient(cl); err != nil {
			return nil, err
		}
		if err := s.admin.CreateTopic(aaTopic, &sarama.TopicDetail{NumPartitions: aaPartitions, ReplicationFactor: 1}, false); err != nil {
			return nil, fmt.Errorf("while creating topic %q on %s: %w", aaTopic, name, err)
		}
		say("Started cluster %s on %s (cluster id %q) with topic %s (%d partitions).", name, strings.Join(s.brokers, ","), name, aaTopic, aaPartitions)
	}

	for i, s := range sides {
		peer := sides[1-i]
		if err := s.writeConfig(dir, peer); err != nil {
			return nil, err
		}
		log, err := os.OpenFile(filepath.Join(dir, "engine-"+s.name+"-to-"+peer.name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("while creating the engine log: %w", err)
		}
		defer log.Close()
		if s.engine, err = startEngine(opts.Engine, s.configPath, log); err != nil {
			return nil, err
		}
		say("Started the engine %s -> %s: kafka-mirror run --config %s (pid %d), same topic names, provenance on.",
			s.name, peer.name, s.configPath, s.engine.Pid())
	}

	// Both clusters are written at once while both engines run.
	half := max(1, opts.Records/2)
	rate := opts.Rate / 2
	g, gctx := errgroup.WithContext(ctx)
	for i, s := range sides {
		g.Go(func() error {
			p, err := audit.Produce(gctx, s.brokers, audit.Workload{
				Topics: map[string]int32{aaTopic: aaPartitions}, Records: half, Rate: rate, NullFraction: 0.02, Seed: int64(i + 1), Run: s.name,
			}, nil)
			if err != nil {
				return fmt.Errorf("while producing to %s: %w", s.name, err)
			}
			if p.Failed > 0 {
				return fmt.Errorf("%s refused %d workload records: %w", s.name, p.Failed, p.FirstError)
			}
			s.produced = p
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	say("Produced %s records to %s and %s to %s, at the same time; both acknowledged every one.",
		count(int64(half)), aaSides[0], count(int64(half)), aaSides[1])

	if err := waitActiveActiveCaughtUp(ctx, sides); err != nil {
		return nil, err
	}
	say("Both engines caught up: every offset of both clusters committed, lag 0.")
	for _, s := range sides {
		if m, err := engineproc.Scrape(ctx, nil, s.metricsAddr); err == nil {
			s.loopDropped = m.Sum("kafka_mirror_loop_dropped_records_total")
		}
		if err := s.engine.Stop(aaStopLimit); err != nil {
			return nil, fmt.Errorf("while stopping the engine reading %s: %w", s.name, err)
		}
	}
	say("Stopped both engines with SIGTERM. Auditing both clusters by record id...")

	res := &ActiveActiveResult{}
	for i, s := range sides {
		peer := sides[1-i]
		m, err := audit.ReadAll(ctx, s.brokers, []string{aaTopic}, audit.ReadOptions{Timeout: time.Minute})
		if err != nil {
			return nil, fmt.Errorf("while reading %s back: %w", s.name, err)
		}
		own, theirs := &audit.Mirrored{Ends: m.Ends}, &audit.Mirrored{Ends: m.Ends}
		unknown := 0
		for _, r := range m.Records {
			switch recordRun(r.ID) {
			case s.name:
				own.Records = append(own.Records, r)
			case peer.name:
				theirs.Records = append(theirs.Records, r)
			default:
				unknown++
			}
		}
		res.Sides[i] = SideResult{
			Name: s.name,
			Own:  audit.Audit(s.produced, own, audit.Options{}),
			// The copies carry the provenance header their originals lack.
			Peer:        audit.Audit(peer.produced, theirs, audit.Options{IgnoreContent: true}),
			Unknown:     unknown,
			LoopDropped: s.loopDropped,
		}
	}
	res.Elapsed = time.Since(start)
	printActiveActiveReport(out, res)
	passed = true
	return res, nil
}

// writeConfig writes the config of the engine that mirrors s into peer.
func (s *aaSide) writeConfig(dir string, peer *aaSide) error {
	addr, err := engineproc.FreeLoopbackAddress()
	if err != nil {
		return err
	}
	s.metricsAddr = addr
	s.group = "kafka-mirror.demo." + s.name + "-to-" + peer.name
	cfg := &config.Config{
		Source:               config.Cluster{BootstrapServers: s.brokers},
		Target:               config.Cluster{BootstrapServers: peer.brokers},
		ConsumerGroup:        s.group,
		Topics:               config.Topics{Include: []string{aaTopic}},
		OffsetCommitInterval: config.Duration{Duration: time.Second},
		TopicSyncInterval:    config.Duration{Duration: 2 * time.Second},
		Provenance:           &config.Provenance{Enabled: true},
		Metrics:              config.Metrics{Address: addr},
	}
	cfg.Default()
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("while validating the demo's mirror config: %w", err)
	}
	data, err := config.Marshal(cfg)
	if err != nil {
		return fmt.Errorf("while rendering the demo's mirror config: %w", err)
	}
	s.configPath = filepath.Join(dir, "mirror-"+s.name+"-to-"+peer.name+".yaml")
	if err := os.WriteFile(s.configPath, data, 0o600); err != nil {
		return fmt.Errorf("while writing the demo's mirror config: %w", err)
	}
	return nil
}

// waitActiveActiveCaughtUp waits until each engine's group has committed every offset
// of the cluster it reads: the records produced there and the copies its peer wrote
// there, which it drops (a drop is committed like a filtered record). Both must be
// caught up in two polls in a row: a side checked before its peer's last copies landed
// is checked again after the peer was seen caught up (all its copies acked).
func waitActiveActiveCaughtUp(ctx context.Context, sides [2]*aaSide) error {
	deadline := time.Now().Add(aaCaughtUpLimit)
	pair := []topicPair{{Source: aaTopic, Target: aaTopic}}
	inARow := 0
	for {
		done := true
		for i, s := range sides {
			o := &observer{source: s.client, target: sides[1-i].client, sourceAdmin: s.admin, group: s.group, topics: pair}
			states, err := o.snapshot()
			if err != nil || !caughtUp(states) {
				done = false
			}
			select {
			case <-s.engine.Done():
				return fmt.Errorf("the engine reading %s exited on its own: %v", s.name, s.engine.Err())
			default:
			}
		}
		if !done {
			inARow = 0
		} else if inARow++; inARow >= 2 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for both engines to commit every record", aaCaughtUpLimit)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// recordRun returns the run of a workload record id "<topic>/<partition>/<run>.<seq>".
func recordRun(id string) string {
	i := strings.LastIndexByte(id, '/')
	j := strings.LastIndexByte(id, '.')
	if i < 0 || j < i {
		return ""
	}
	return id[i+1 : j]
}

func printActiveActiveReport(out interface{ Write([]byte) (int, error) }, r *ActiveActiveResult) {
	var b strings.Builder
	fmt.Fprintf(&b, "\nActive-active report (%.1fs)\n", r.Elapsed.Seconds())
	for i, s := range r.Sides {
		peer := r.Sides[1-i].Name
		fmt.Fprintf(&b, "  %s\n", s.Name)
		line := func(name string, n int, note string) {
			fmt.Fprintf(&b, "    %-18s %10s  %s\n", name, count(int64(n)), note)
		}
		line("own records", s.Own.Total.Produced, "produced here and acknowledged")
		line("own, once", s.Own.Total.Mirrored, "present exactly once")
		line("own, looped back", s.Own.Total.Duplicated, "extra copies that came back from "+peer)
		line("from "+peer, s.Peer.Total.Mirrored, fmt.Sprintf("of %s produced there, each once", count(int64(s.Peer.Total.Produced))))
		line("lost", s.Own.Total.Lost+s.Peer.Total.Lost, "")
		line("duplicated", s.Peer.Total.Duplicated, "copies of "+peer+"'s records beyond the first")
		line("out of order", s.Own.Total.OutOfOrder+s.Peer.Total.OutOfOrder, "per source partition")
		line("dropped as looping", int(s.LoopDropped), "by the engine reading "+s.Name+": copies that came from "+peer)
	}
	if err := r.Err(); err != nil {
		fmt.Fprintf(&b, "\nFAILED: %v\n", err)
	} else {
		b.WriteString("\nPASSED: each cluster holds its own records and its peer's, each exactly once; nothing looped.\n")
	}
	_, _ = out.Write([]byte(b.String()))
}
