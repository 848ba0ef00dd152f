package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/IBM/sarama"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/engineproc"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
)

// The cost of consumer-group offset translation (issue 13: offset syncs written "rarely
// enough to cost < 2% throughput"). Each round mirrors the same records three times,
// each run into a fresh target:
//   - plain: the engine without groups;
//   - syncs: groups set with an include that matches no group, so the engine writes
//     offset syncs from its ack path and its checkpoint rounds find nothing to
//     translate: the cost the issue bounds;
//   - groups: groups including benchSourceGroup, checkpointed every groupsSyncInterval
//     (30 times the default): offset syncs and checkpoint rounds together.
//
// The order rotates from round to round so that a slow phase of the shared machine
// does not always hit the same arm, and each cost is the median over the rounds of the
// per-round ratio against that round's plain run.

const (
	// benchSourceGroup is the source consumer group the groups runs checkpoint; it has
	// committed half of every partition before the runs.
	benchSourceGroup = "bench-app"
	// benchNoGroup is the syncs runs' groups.include: no source group has this name, so
	// those runs write offset syncs and checkpoint nothing.
	benchNoGroup = "bench-no-such-group"
	// groupsSyncInterval is the runs' groups.syncInterval: 30 times the default, so that
	// checkpoint rounds happen during a short run and their cost is in the figure.
	groupsSyncInterval = time.Second
	// groupsLinger is how long every run of a round keeps running after the last record
	// arrived, so the groups run gets a checkpoint round after the mirror caught up;
	// CPU time includes it for every arm alike.
	groupsLinger = 3 * groupsSyncInterval
	// groupsCostGoal is the bound on the throughput cost of offset syncs; the
	// groups arm is reported against it too, as a reference.
	groupsCostGoal = 0.02
)

// The arms of a round, in the order of round 1; round n starts at arm (n-1) mod 3.
const (
	armPlain  = "plain"
	armSyncs  = "syncs"
	armGroups = "groups"
)

var groupsArms = []string{armPlain, armSyncs, armGroups}

// groupsResult is the offset-translation cost measurement.
type groupsResult struct {
	SyncIntervalSeconds float64       `json:"groupsSyncIntervalSeconds"`
	Rounds              []groupsRound `json:"rounds"`
	// SyncsCost is the median of 1 - syncs rate / plain rate; SyncsCPUCost the median of
	// syncs CPU per record / plain CPU per record - 1.
	SyncsCost    float64 `json:"syncsCost"`
	SyncsCPUCost float64 `json:"syncsCPUCost"`
	// Cost and CPUCost are the same for the groups arm (offset syncs and checkpoints).
	Cost    float64 `json:"cost"`
	CPUCost float64 `json:"cpuCost"`
}

// groupsRound is one plain, one syncs and one groups run over the same records.
type groupsRound struct {
	// Order is the order the arms ran in.
	Order  []string     `json:"order"`
	Plain  engineResult `json:"plain"`
	Syncs  engineResult `json:"syncs"`
	Groups engineResult `json:"groups"`
	// SyncsOffsetSyncs is the number of offset syncs the syncs run wrote (the sync
	// topic's end offset), SyncsCheckpointedPartitions the partitions of
	// benchSourceGroup it committed on the target (0 when it behaved).
	SyncsOffsetSyncs            int64 `json:"syncsOffsetSyncs"`
	SyncsCheckpointedPartitions int   `json:"syncsCheckpointedPartitions"`
	// OffsetSyncs and CheckpointedPartitions are the same for the groups run, which
	// should have checkpointed every partition.
	OffsetSyncs            int64 `json:"offsetSyncs"`
	CheckpointedPartitions int   `json:"checkpointedPartitions"`
}

// groupsCost runs b.o.groupsRounds rounds and records them in rep.
func (b *bench) groupsCost(ctx context.Context, rep *report) error {
	if b.o.groupsRounds == 0 {
		return nil
	}
	if err := b.commitSourceGroup(); err != nil {
		return err
	}
	res := &groupsResult{SyncIntervalSeconds: groupsSyncInterval.Seconds()}
	n := b.o.records
	for i := 0; i < b.o.groupsRounds; i++ {
		var r groupsRound
		for j := range groupsArms {
			arm := groupsArms[(i+j)%len(groupsArms)]
			r.Order = append(r.Order, arm)
			var err error
			switch arm {
			case armPlain:
				r.Plain, _, _, err = b.groupsRun(ctx, arm, nil, n)
			case armSyncs:
				r.Syncs, r.SyncsOffsetSyncs, r.SyncsCheckpointedPartitions, err = b.groupsRun(ctx, arm, []string{regexp.QuoteMeta(benchNoGroup)}, n)
			case armGroups:
				r.Groups, r.OffsetSyncs, r.CheckpointedPartitions, err = b.groupsRun(ctx, arm, []string{regexp.QuoteMeta(benchSourceGroup)}, n)
			}
			if err != nil {
				return fmt.Errorf("offset translation cost, round %d, %s run: %w", i+1, arm, err)
			}
		}
		b.logf("Offset translation round %d (%s): syncs/plain %.3f, CPU per record %+.1f%%, %d offset syncs, %d partitions checkpointed; groups/plain %.3f, CPU per record %+.1f%%, %d offset syncs, %d partitions checkpointed",
			i+1, strings.Join(r.Order, ", "),
			1-rateCost(r.Syncs, r.Plain), cpuCost(r.Syncs, r.Plain)*100, r.SyncsOffsetSyncs, r.SyncsCheckpointedPartitions,
			1-rateCost(r.Groups, r.Plain), cpuCost(r.Groups, r.Plain)*100, r.OffsetSyncs, r.CheckpointedPartitions)
		res.Rounds = append(res.Rounds, r)
	}
	res.summarise()
	rep.Groups = res
	return nil
}

// rateCost is 1 - run's rate / plain's rate; cpuCost is run's CPU per record over
// plain's, - 1.
func rateCost(run, plain engineResult) float64 {
	return 1 - run.Rate.RecordsPerSecond()/plain.Rate.RecordsPerSecond()
}

func cpuCost(run, plain engineResult) float64 { return run.CPUPerMillion/plain.CPUPerMillion - 1 }

// summarise computes the medians of the rounds' costs.
func (g *groupsResult) summarise() {
	g.SyncsCost = medianOf(g.Rounds, func(r groupsRound) float64 { return rateCost(r.Syncs, r.Plain) })
	g.SyncsCPUCost = medianOf(g.Rounds, func(r groupsRound) float64 { return cpuCost(r.Syncs, r.Plain) })
	g.Cost = medianOf(g.Rounds, func(r groupsRound) float64 { return rateCost(r.Groups, r.Plain) })
	g.CPUCost = medianOf(g.Rounds, func(r groupsRound) float64 { return cpuCost(r.Groups, r.Plain) })
}

// groupsTargets are the report's target lines for the measurement (none without it):
// the goal for offset syncs, and the same bound as a reference for syncs with
// checkpoint rounds every second. Each is met only when every round's run did what its
// arm is for: the syncs run wrote offset syncs and checkpointed nothing, the groups run
// wrote offset syncs and checkpointed every partition.
func (r *report) groupsTargets() []target {
	g := r.Groups
	if g == nil {
		return nil
	}
	syncsOnly, checkpointed := true, true
	for _, x := range g.Rounds {
		syncsOnly = syncsOnly && x.SyncsOffsetSyncs > 0 && x.SyncsCheckpointedPartitions == 0
		checkpointed = checkpointed && x.OffsetSyncs > 0 && x.CheckpointedPartitions == r.Settings.Partitions
	}
	goal := fmt.Sprintf("<= %.0f%% of throughput", groupsCostGoal*100)
	value := func(cost, cpu float64, behaved bool, what string) string {
		v := fmt.Sprintf("%.1f%% (CPU per record %+.1f%%, median of %d rounds)", cost*100, cpu*100, len(g.Rounds))
		if !behaved {
			v += "; " + what
		}
		return v
	}
	return []target{
		{
			Name:  "Cost of offset syncs (groups set, no group to checkpoint)",
			Goal:  goal,
			Value: value(g.SyncsCost, g.SyncsCPUCost, syncsOnly, "a run wrote no offset sync or checkpointed a group"),
			Met:   g.SyncsCost <= groupsCostGoal && syncsOnly,
		},
		{
			Name: fmt.Sprintf("Cost of offset syncs + checkpoints at syncInterval %s, %.0fx the default (supplementary)",
				groupsSyncInterval, config.DefaultGroupSyncInterval.Seconds()/groupsSyncInterval.Seconds()),
			Goal:  goal + " (reference)",
			Value: value(g.Cost, g.CPUCost, checkpointed, "a run wrote no offset sync or did not checkpoint every partition"),
			Met:   g.Cost <= groupsCostGoal && checkpointed,
		},
	}
}

// groupsMarkdown writes the measurement's rounds into results.md.
func (r *report) groupsMarkdown(w io.Writer) {
	g := r.Groups
	if g == nil {
		return
	}
	fmt.Fprintf(w, "\n## Offset translation\n\nEach round mirrors the records three times, each into a fresh target and lingering %s after the last record: "+
		"plain (no `groups`), syncs (`groups` set, matching no group: offset syncs only) and groups (`groups` including one source group that committed half of "+
		"every partition, `syncInterval` %s). The order rotates from round to round; the costs are medians of the rounds' ratios against plain.\n\n",
		groupsLinger, groupsSyncInterval)
	t := [][]string{{"round", "order", "plain", "syncs", "groups", "syncs CPU / record", "groups CPU / record", "offset syncs (syncs, groups)", "partitions checkpointed (syncs, groups)"}}
	for i, x := range g.Rounds {
		t = append(t, []string{fmt.Sprint(i + 1), strings.Join(x.Order, ", "),
			fmtNum(x.Plain.Rate.RecordsPerSecond()), fmtNum(x.Syncs.Rate.RecordsPerSecond()), fmtNum(x.Groups.Rate.RecordsPerSecond()),
			fmt.Sprintf("%+.1f%%", cpuCost(x.Syncs, x.Plain)*100), fmt.Sprintf("%+.1f%%", cpuCost(x.Groups, x.Plain)*100),
			fmt.Sprintf("%d, %d", x.SyncsOffsetSyncs, x.OffsetSyncs), fmt.Sprintf("%d, %d", x.SyncsCheckpointedPartitions, x.CheckpointedPartitions)})
	}
	writeMarkdownTable(w, t)
}

// commitSourceGroup commits half of every partition of the data topic for
// benchSourceGroup on the source, as an application that read that far and stopped.
func (b *bench) commitSourceGroup() error {
	cl, err := kafka.NewClient(config.Cluster{BootstrapServers: b.srcBrokers}, kafka.WithRole(kafka.RoleSource))
	if err != nil {
		return err
	}
	defer func() { _ = cl.Close() }()
	req := sarama.NewOffsetCommitRequest(cl.Config(), benchSourceGroup)
	for p := int32(0); p < int32(b.o.partitions); p++ {
		end, err := cl.GetOffset(dataTopic, p, sarama.OffsetNewest)
		if err != nil {
			return fmt.Errorf("while reading the end of source %s/%d: %w", dataTopic, p, err)
		}
		req.AddBlockWithLeaderEpoch(dataTopic, p, end/2, -1, 0, "")
	}
	coordinator, err := cl.Coordinator(benchSourceGroup)
	if err != nil {
		return fmt.Errorf("while finding the coordinator of %s: %w", benchSourceGroup, err)
	}
	resp, err := coordinator.CommitOffset(req)
	if err != nil {
		return fmt.Errorf("while committing the offsets of %s: %w", benchSourceGroup, err)
	}
	for _, ps := range resp.Errors {
		for p, kerr := range ps {
			if !errors.Is(kerr, sarama.ErrNoError) {
				return fmt.Errorf("while committing the offsets of %s, partition %d: %w", benchSourceGroup, p, kerr)
			}
		}
	}
	return nil
}

// groupsRun mirrors want records into a fresh target with the no-data-loss engine,
// with groups.include set to include unless it is empty, and lingers groupsLinger
// before stopping it. With groups it returns the offset syncs written and the
// partitions of benchSourceGroup checkpointed on the target.
func (b *bench) groupsRun(ctx context.Context, name string, include []string, want int) (res engineResult, syncs int64, checkpointed int, err error) {
	res = engineResult{Name: name, Records: want}
	spec := engineSpec{name: name, noDataLoss: true, streams: b.o.streams, maxInFlight: b.o.maxInFlight}
	err = b.withTarget(ctx, name, 0, dataTopic, func(target []string) error {
		counter, err := newTargetCounter(target, dataTopic, int32(b.o.partitions))
		if err != nil {
			return err
		}
		defer counter.close()
		addr, err := engineproc.FreeLoopbackAddress()
		if err != nil {
			return err
		}
		run := b.runName(name)
		cfg, err := engineConfig(spec, b.srcBrokers, target, "bench-"+run, dataTopic, addr)
		if err != nil {
			return err
		}
		groups := len(include) > 0
		if groups {
			cfg.Groups = &config.Groups{Include: include, SyncInterval: config.Duration{Duration: groupsSyncInterval}}
			if err := cfg.Validate(); err != nil {
				return fmt.Errorf("while building the groups engine config: %w", err)
			}
		}
		p, err := startEngine(b.engineBin, b.o.engineEnv, b.workDir, run, cfg)
		if err != nil {
			return err
		}
		wctx, cancel := context.WithTimeout(ctx, b.runTimeout(want))
		pr, err := waitForRecords(wctx, p, counter, int64(want), false, nil)
		cancel()
		if err != nil {
			stopEngine(p, syscall.SIGKILL, 5*time.Second)
			return fmt.Errorf("while waiting for the %s run (log %s): %w", name, p.LogPath(), err)
		}
		select {
		case <-time.After(groupsLinger):
		case <-ctx.Done():
		}
		u := stopEngine(p, syscall.SIGTERM, time.Minute)
		if u.ExitErr != nil {
			return fmt.Errorf("the %s engine did not stop cleanly: %w; last log lines:\n%s", name, u.ExitErr, p.LogTail(logTailLines))
		}
		res.fill(pr, u, int64(b.gen.recordBytes(0)))
		if groups {
			syncs, checkpointed, err = checkpointsOn(counter.client, cfg.ConsumerGroup)
		}
		return err
	})
	return res, syncs, checkpointed, err
}

// checkpointsOn reads from the target how many offset syncs the mirror with source
// group mirrorGroup wrote, and how many partitions of benchSourceGroup it checkpointed.
func checkpointsOn(target sarama.Client, mirrorGroup string) (int64, int, error) {
	syncs, err := target.GetOffset(mirror.OffsetSyncTopic(mirrorGroup), 0, sarama.OffsetNewest)
	if err != nil {
		return 0, 0, fmt.Errorf("while reading the offset sync topic: %w", err)
	}
	admin, err := sarama.NewClusterAdminFromClient(target)
	if err != nil {
		return 0, 0, err
	}
	// Not closed: that would close target, which its owner closes.
	resp, err := admin.ListConsumerGroupOffsets(benchSourceGroup, nil)
	if errors.Is(err, sarama.ErrGroupIDNotFound) {
		return syncs, 0, nil // nothing was committed to the group: the syncs arm's case
	}
	if err != nil {
		return 0, 0, fmt.Errorf("while reading the target group %s: %w", benchSourceGroup, err)
	}
	n := 0
	for _, parts := range resp.Blocks {
		for _, blk := range parts {
			if _, ok := mirror.ParseCheckpointMetadata(blk.Metadata); ok && blk.Offset >= 0 {
				n++
			}
		}
	}
	return syncs, n, nil
}
