package mirror

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/IBM/sarama"
	"github.com/go-logr/logr"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
)

// failbackPlanTimeout bounds each wait of PlanFailback for a cluster's answer.
const failbackPlanTimeout = 15 * time.Second

// FailbackPlan says what a failback mirror (a reverse mirror with
// initialPositions.fromFailover) will do when it starts, per partition, and what the
// failover left behind on the original source. `kafka-mirror failback` prints it
// before it starts the mirror.
type FailbackPlan struct {
	// Failover is the header of the failover the points come from.
	Failover FailbackHeader `json:"failover"`
	// Partitions are the failback mirror's source partitions (the failed-over mirror's
	// target partitions) that have a failback point, sorted.
	Partitions []FailbackPlanPartition `json:"partitions"`
	// OriginalSourceReachable reports that the failback mirror's target (the original
	// source) answered; LeftBehind is then known per partition.
	OriginalSourceReachable bool `json:"originalSourceReachable"`
	// Groups lists, for every target group of the failback mirror's groups.include
	// that committed on a failed-back partition, what its checkpoints will do.
	Groups []FailbackPlanGroup `json:"groups,omitempty"`
	// LeftBehind lists, per original source partition, the offsets that were never
	// mirrored before the cutover: never mirrored back or forward by the failback, only
	// listed (docs/failover.md says how to mirror or drop them).
	LeftBehind []FailbackLeftBehind `json:"leftBehind"`
}

// FailbackPlanPartition is where one partition of the failback mirror starts.
type FailbackPlanPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// FailbackPoint is the target end at the cutover; Start where the mirror starts
	// (the failback point, the mirror's own progress, or initialOffset); StartFrom says
	// which.
	FailbackPoint int64  `json:"failbackPoint"`
	Start         int64  `json:"start"`
	StartFrom     string `json:"startFrom"`
	// End is the partition's end now; ToCopy = End - Start, the records written after
	// the cutover that flow back (-1 when not known).
	End    int64 `json:"end"`
	ToCopy int64 `json:"toCopy"`
}

// FailbackPlanGroup is one group partition: the group's offset on the failback
// mirror's source (the failed-over mirror's target, where its consumers moved), its
// offset on the original source now, and what the failback mirror's checkpoints do.
type FailbackPlanGroup struct {
	Group     string `json:"group"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Offset is the group's committed offset on the failback mirror's source;
	// FailbackPoint the partition's failback point; OriginalSourceOffset the group's
	// offset on the original source now (-1: none, or the source did not answer).
	Offset               int64 `json:"offset"`
	FailbackPoint        int64 `json:"failbackPoint"`
	OriginalSourceOffset int64 `json:"originalSourceOffset"`
	// Action says what happens: translated by the checkpoints (at or past the failback
	// point), or not translated and why.
	Action string `json:"action"`
}

// FailbackLeftBehind is one original source partition's records that the failover
// left behind: offsets From up to To (exclusive), Count of them.
type FailbackLeftBehind struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	From      int64  `json:"from"`
	To        int64  `json:"to"`
	Count     int64  `json:"count"`
	// Note says how the range is known: "at the cutover", "read now" (the source did
	// not answer the failover), "at most: ..." or why it is unknown.
	Note string `json:"note,omitempty"`
}

// PlanFailback reads the failback points of cfg.InitialPositions.FromFailover from
// cfg's source cluster, the failback mirror's own progress (its consumer group on the
// source) and the ends of the partitions, and, when cfg's target (the original source)
// answers, the left-behind ranges. It changes nothing.
func PlanFailback(ctx context.Context, cfg *config.Config, opts ...Option) (*FailbackPlan, error) {
	o := options{}
	for _, opt := range opts {
		opt(&o)
	}
	if cfg.InitialPositions == nil || cfg.InitialPositions.FromFailover == "" {
		return nil, errors.New("initialPositions.fromFailover: Required value: the consumerGroup of the failed-over mirror")
	}
	source, err := planClient(cfg, kafka.RoleSource, o)
	if err != nil {
		return nil, fmt.Errorf("while connecting to the source cluster (the failed-over mirror's target): %w", err)
	}
	admin, err := sarama.NewClusterAdminFromClient(source)
	if err != nil {
		_ = source.Close()
		return nil, err
	}
	defer admin.Close() // and source
	fb, err := ReadFailback(ctx, source, cfg.InitialPositions.FromFailover)
	if err != nil {
		return nil, fmt.Errorf("initialPositions.fromFailover: %q: %w", cfg.InitialPositions.FromFailover, err)
	}
	ids, _ := describeTopicIDs(ctx, admin, pointTopics(fb))
	plan := &FailbackPlan{Failover: fb.Header, Partitions: []FailbackPlanPartition{}, LeftBehind: []FailbackLeftBehind{}}
	own := map[partitionKey]int64{}
	byTopic := map[string][]int32{}
	for _, p := range fb.Points {
		byTopic[p.Topic] = append(byTopic[p.Topic], p.Partition)
	}
	if resp, err := listOffsets(admin, cfg.ConsumerGroup, byTopic); err == nil {
		for _, p := range fb.Points {
			if b := blockOf(resp, p.Topic, p.Partition); b != nil && errors.Is(b.Err, sarama.ErrNoError) && b.Offset >= 0 {
				own[partitionKey{p.Topic, p.Partition}] = b.Offset
			}
		}
	}
	listed := map[partitionKey]int{}
	for i, lo := range cfg.InitialPositions.Offsets {
		listed[partitionKey{lo.Topic, lo.Partition}] = i
	}
	for _, p := range fb.Points {
		tp := partitionKey{p.Topic, p.Partition}
		pp := FailbackPlanPartition{Topic: p.Topic, Partition: p.Partition, FailbackPoint: p.Offset, Start: p.Offset, StartFrom: "failback point", End: -1, ToCopy: -1}
		if end, err := source.GetOffset(p.Topic, p.Partition, sarama.OffsetNewest); err == nil {
			pp.End = end
		}
		i, isListed := listed[tp]
		ownStart, hasOwn := own[tp]
		switch {
		case hasOwn:
			pp.Start, pp.StartFrom = ownStart, "own progress (a restart)"
		case isListed:
			pp.Start, pp.StartFrom = cfg.InitialPositions.Offsets[i].Offset, fmt.Sprintf("initialPositions.offsets[%d]", i)
		case p.TopicID != "" && ids[p.Topic] != "" && p.TopicID != ids[p.Topic]:
			pp.Start, pp.StartFrom = -1, fmt.Sprintf("initialOffset %s: the topic was created again since the failover", cfg.InitialOffset)
			if cfg.InitialOffset != config.InitialOffsetLatest {
				if start, err := source.GetOffset(p.Topic, p.Partition, sarama.OffsetOldest); err == nil {
					pp.Start = start
				}
			} else {
				pp.Start = pp.End
			}
		}
		if pp.End >= 0 && pp.Start >= 0 {
			pp.ToCopy = max(pp.End-pp.Start, 0)
		}
		plan.Partitions = append(plan.Partitions, pp)
	}
	target, err := planClient(cfg, kafka.RoleTarget, o)
	if err == nil {
		defer target.Close()
		plan.OriginalSourceReachable = true
	}
	if cfg.GroupsEnabled() {
		ft, err := newFailbackTranslation(ctx, source, cfg.InitialPositions.FromFailover, fb, logr.Discard())
		if err != nil {
			return nil, err
		}
		plan.Groups = planGroups(cfg, admin, target, fb, ft)
	}
	for _, p := range fb.Points {
		lb := FailbackLeftBehind{Topic: p.SourceTopic, Partition: p.Partition, From: p.LastMirroredOffset + 1, To: -1, Count: -1}
		switch {
		case p.SourceEnd != nil:
			lb.To, lb.Note = *p.SourceEnd, "at the cutover"
			if p.LeftBehindNote != "" {
				lb.Note = p.LeftBehindNote
			}
		case target != nil:
			end, err := target.GetOffset(p.SourceTopic, p.Partition, sarama.OffsetNewest)
			if err != nil {
				lb.Note = "unknown: " + err.Error()
				break
			}
			lb.To, lb.Note = end, "read now: the source did not answer the failover (records written to it since are counted too)"
		default:
			lb.Note = UnknownSourceUnreachable
		}
		if lb.To >= 0 {
			lb.Count = max(lb.To-lb.From, 0)
		}
		if lb.Count != 0 {
			plan.LeftBehind = append(plan.LeftBehind, lb)
		}
	}
	return plan, nil
}

func pointTopics(fb *Failback) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range fb.Points {
		if !seen[p.Topic] {
			seen[p.Topic] = true
			out = append(out, p.Topic)
		}
	}
	return out
}

// planClient connects to one cluster of cfg, every wait bounded by failbackPlanTimeout.
func planClient(cfg *config.Config, role string, o options) (sarama.Client, error) {
	sc, err := kafka.AdminConfig(cfg, role, o.kafkaOpts...)
	if err != nil {
		return nil, err
	}
	sc.Net.DialTimeout, sc.Net.ReadTimeout, sc.Net.WriteTimeout = failbackPlanTimeout, failbackPlanTimeout, failbackPlanTimeout
	sc.Metadata.Retry.Max = 1
	cl := cfg.Source
	if role == kafka.RoleTarget {
		cl = cfg.Target
	}
	return kafka.NewClientFromConfig(cl, sc, append([]kafka.Option{kafka.WithRole(role)}, o.kafkaOpts...)...)
}

// planGroups says, for every group of cfg's groups.include on the failback mirror's
// source with an offset on a failed-back partition, what the checkpoints will do.
func planGroups(cfg *config.Config, admin sarama.ClusterAdmin, target sarama.Client, fb *Failback, ft *failbackTranslation) []FailbackPlanGroup {
	sel, err := NewGroupSelector(cfg)
	if err != nil {
		return nil
	}
	list, err := admin.ListConsumerGroups()
	if err != nil {
		return nil
	}
	var names []string
	for g := range list {
		if sel.Matches(g) {
			names = append(names, g)
		}
	}
	sort.Strings(names)
	var targetAdmin sarama.ClusterAdmin
	if target != nil {
		targetAdmin, _ = sarama.NewClusterAdminFromClient(target)
	}
	var out []FailbackPlanGroup
	for _, g := range names {
		resp, err := listOffsets(admin, g, nil)
		if err != nil || resp == nil {
			continue
		}
		var orig *sarama.OffsetFetchResponse
		if targetAdmin != nil {
			orig, _ = listOffsets(targetAdmin, g, nil)
		}
		for _, p := range fb.Points {
			b := blockOf(resp, p.Topic, p.Partition)
			if b == nil || !errors.Is(b.Err, sarama.ErrNoError) || b.Offset < 0 {
				continue
			}
			pg := FailbackPlanGroup{Group: g, Topic: p.Topic, Partition: p.Partition, Offset: b.Offset, FailbackPoint: p.Offset, OriginalSourceOffset: -1}
			if ob := blockOf(orig, p.SourceTopic, p.Partition); ob != nil && errors.Is(ob.Err, sarama.ErrNoError) && ob.Offset >= 0 {
				pg.OriginalSourceOffset = ob.Offset
			}
			switch {
			case b.Offset >= p.Offset:
				pg.Action = "translated by the checkpoints once mirrored (at or past the failback point)"
			case translatedBelow(ft, p, b.Offset, &pg):
			case pg.OriginalSourceOffset < 0:
				pg.Action = "not translated (below the failback point) and no offset on the original source: its consumers start at auto.offset.reset there; commit one by hand (docs/failover.md)"
			default:
				pg.Action = fmt.Sprintf("not translated (below the failback point, no exact translation through the failed-over mirror's offset syncs): keeps its offset %d on the original source", pg.OriginalSourceOffset)
			}
			out = append(out, pg)
		}
	}
	return out
}

// translatedBelow says, for a group offset below the failback point, where the
// failed-over mirror's offset syncs translate it.
func translatedBelow(ft *failbackTranslation, p FailbackPoint, offset int64, pg *FailbackPlanGroup) bool {
	to, ok := ft.translate(partitionKey{p.Topic, p.Partition}, offset)
	if !ok {
		return false
	}
	pg.Action = fmt.Sprintf("translated by the checkpoints to %d, exactly, through the failed-over mirror's offset syncs (below the failback point)", to)
	if pg.OriginalSourceOffset > to {
		pg.Action += fmt.Sprintf("; not committed while the group's offset %d there is further (never moved back)", pg.OriginalSourceOffset)
	}
	return true
}
