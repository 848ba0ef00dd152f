package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"syscall"
	"time"

	"github.com/IBM/sarama"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/engineproc"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
)

// The cost of consumer-group offset translation (issue 13: offset syncs written "rarely
// enough to cost < 2% throughput"). Pairs of engine runs mirror the same records: the
// plain engine, and the engine with groups set, which writes offset syncs from its ack
// path and checkpoints one source group every groupsSyncInterval. The order alternates
// from pair to pair so that a slow phase of the shared machine hits both alike, and the
// cost is the median over the pairs of 1 - (groups rate / plain rate).

const (
	// benchSourceGroup is the source consumer group the groups runs checkpoint; it has
	// committed half of every partition before the runs.
	benchSourceGroup = "bench-app"
	// groupsSyncInterval is the runs' groups.syncInterval: 30 times the default, so that
	// checkpoint rounds happen during a short run and their cost is in the figure.
	groupsSyncInterval = time.Second
	// groupsLinger is how long both runs of a pair keep running after the last record
	// arrived, so the groups run gets a checkpoint round after the mirror caught up;
	// CPU time includes it for both alike.
	groupsLinger = 3 * groupsSyncInterval
	// groupsCostGoal is the bound on the throughput cost.
	groupsCostGoal = 0.02
)

// groupsResult is the offset-translation cost measurement.
type groupsResult struct {
	SyncIntervalSeconds float64      `json:"groupsSyncIntervalSeconds"`
	Pairs               []groupsPair `json:"pairs"`
	// Cost is the median of 1 - groups rate / plain rate; CPUCost the median of groups
	// CPU per record / plain CPU per record - 1.
	Cost    float64 `json:"cost"`
	CPUCost float64 `json:"cpuCost"`
}

// groupsPair is one plain run and one groups run over the same records.
type groupsPair struct {
	Plain  engineResult `json:"plain"`
	Groups engineResult `json:"groups"`
	// OffsetSyncs is the number of offset syncs the groups run wrote (the sync topic's
	// end offset); CheckpointedPartitions the partitions of benchSourceGroup it
	// committed on the target.
	OffsetSyncs            int64 `json:"offsetSyncs"`
	CheckpointedPartitions int   `json:"checkpointedPartitions"`
}

// groupsCost runs b.o.rounds pairs and records them in rep.
func (b *bench) groupsCost(ctx context.Context, rep *report) error {
	if err := b.commitSourceGroup(); err != nil {
		return err
	}
	res := &groupsResult{SyncIntervalSeconds: groupsSyncInterval.Seconds()}
	n := b.o.records
	for i := 0; i < b.o.rounds; i++ {
		var pair groupsPair
		for j := 0; j < 2; j++ {
			var err error
			if (i+j)%2 == 0 {
				pair.Plain, _, _, err = b.groupsRun(ctx, "plain", false, n)
			} else {
				pair.Groups, pair.OffsetSyncs, pair.CheckpointedPartitions, err = b.groupsRun(ctx, "groups", true, n)
			}
			if err != nil {
				return fmt.Errorf("offset translation cost, pair %d: %w", i+1, err)
			}
		}
		b.logf("Offset translation pair %d: groups/plain %.3f, CPU per record %+.1f%%, %d offset syncs, %d partitions checkpointed",
			i+1, pair.Groups.Rate.RecordsPerSecond()/pair.Plain.Rate.RecordsPerSecond(),
			(pair.Groups.CPUPerMillion/pair.Plain.CPUPerMillion-1)*100, pair.OffsetSyncs, pair.CheckpointedPartitions)
		res.Pairs = append(res.Pairs, pair)
	}
	res.summarise()
	rep.Groups = res
	return nil
}

// summarise computes Cost and CPUCost from the pairs.
func (g *groupsResult) summarise() {
	g.Cost = medianOf(g.Pairs, func(p groupsPair) float64 {
		return 1 - p.Groups.Rate.RecordsPerSecond()/p.Plain.Rate.RecordsPerSecond()
	})
	g.CPUCost = medianOf(g.Pairs, func(p groupsPair) float64 { return p.Groups.CPUPerMillion/p.Plain.CPUPerMillion - 1 })
}

// groupsTargets is the report's target line for the measurement (none without it).
func (r *report) groupsTargets() []target {
	g := r.Groups
	if g == nil {
		return nil
	}
	checkpointed := true
	for _, p := range g.Pairs {
		checkpointed = checkpointed && p.OffsetSyncs > 0 && p.CheckpointedPartitions == r.Settings.Partitions
	}
	return []target{{
		Name:  fmt.Sprintf("Cost of offset syncs + checkpoints (groups, syncInterval %s)", groupsSyncInterval),
		Goal:  fmt.Sprintf("<= %.0f%% of throughput", groupsCostGoal*100),
		Value: fmt.Sprintf("%.1f%% (CPU per record %+.1f%%, median of %d pairs)", g.Cost*100, g.CPUCost*100, len(g.Pairs)),
		Met:   g.Cost <= groupsCostGoal && checkpointed,
	}}
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
// with groups set when groups is true, and lingers groupsLinger before stopping it.
// With groups it returns the offset syncs written and the partitions of
// benchSourceGroup checkpointed on the target.
func (b *bench) groupsRun(ctx context.Context, name string, groups bool, want int) (res engineResult, syncs int64, checkpointed int, err error) {
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
		if groups {
			cfg.Groups = &config.Groups{Include: []string{regexp.QuoteMeta(benchSourceGroup)}, SyncInterval: config.Duration{Duration: groupsSyncInterval}}
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
