package controllers

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/topics"
)

// Consumer-group checkpoint status (status.groups).
//
// The engine commits every checkpoint to the target group with mirror.CheckpointMetadata
// as the OffsetCommit metadata (its mirror, the time, the source offset), and commits
// an unchanged offset again every groups.syncInterval to renew that time. The operator
// reads the target groups back at each topic sync, on the same timer and the same
// cached clients (kafkaClients), off the reconcile workers: one DescribeGroups for the
// listed groups, one OffsetFetch per listed group, and only for a group without a
// checkpoint one OffsetFetch on the source and one ListOffsets of the offset-sync topic
// to tell why. So the status shows what the consumers would really resume from, as the
// engine committed it, and keeps being reported while the mirror pods are down (the
// checkpoint time then ages, which is the point).
//
// The other way, translating in the operator from the offset-sync topic, was not
// taken: it reads a topic that grows with the mirror's traffic, for every mirror at
// every interval, and reports what a checkpoint would be rather than what is committed.
//
// A config that refuses translation (partitioning hash or roundRobin, a named handler,
// a transform of topic or partition) never gets here: validation stalls the KafkaMirror
// with the field path (config.TranslationRefused).
//
// The checkpoint times move every groups.syncInterval, so a mirror with spec.groups
// has its status written once per topicSyncInterval; a mirror without writes nothing
// more than before.

// readGroupCheckpoints reads the checkpoint state of the source groups that cfg.Groups
// selects (nil without cfg.Groups) from the target cluster.
func readGroupCheckpoints(cfg *config.Config, src, tgt *kafkaClient) (*v1alpha1.GroupsStatus, error) {
	if cfg.Groups == nil {
		return nil, nil
	}
	sel, err := mirror.NewGroupSelector(cfg)
	if err != nil { // validate already compiled these; keep the error rather than panic
		return nil, fmt.Errorf("while compiling spec.groups: %w", err)
	}
	listed, err := src.admin.ListConsumerGroups()
	if err != nil {
		return nil, fmt.Errorf("while listing the source consumer groups: %w", err)
	}
	names := make([]string, 0, len(listed))
	for g := range listed {
		if sel.Matches(g) {
			names = append(names, g)
		}
	}
	sort.Strings(names)
	out := &v1alpha1.GroupsStatus{Selected: int32(len(names))}
	names = names[:min(len(names), v1alpha1.MaxGroupStatuses)]
	if len(names) == 0 {
		return out, nil
	}
	members, err := groupMembers(tgt.admin, names)
	if err != nil {
		return nil, err
	}
	why := &pendingReasons{cfg: cfg, src: src, tgt: tgt}
	for _, g := range names {
		gs, err := readGroupCheckpoint(cfg, tgt.admin, g, members[g], why)
		if err != nil {
			return nil, err
		}
		switch gs.State {
		case v1alpha1.GroupStateCheckpointed:
			out.Checkpointed++
		case v1alpha1.GroupStateSkipped:
			out.Skipped++
		default:
			out.Pending++
		}
		out.Items = append(out.Items, gs)
	}
	return out, nil
}

// groupMembers returns the number of members of each of groups on the target cluster.
func groupMembers(admin sarama.ClusterAdmin, groups []string) (map[string]int32, error) {
	desc, err := admin.DescribeConsumerGroups(groups)
	if err != nil {
		return nil, fmt.Errorf("while describing consumer groups on the target cluster: %w", err)
	}
	out := make(map[string]int32, len(desc))
	for _, d := range desc {
		out[d.GroupId] = int32(len(d.Members))
	}
	return out, nil
}

// readGroupCheckpoint reads one target group's committed offsets and tells which the
// mirror of cfg put there, and when.
func readGroupCheckpoint(cfg *config.Config, tgt sarama.ClusterAdmin, group string, members int32, why *pendingReasons) (v1alpha1.GroupStatus, error) {
	gs := v1alpha1.GroupStatus{Name: group, ActiveMembers: members}
	resp, err := fetchGroupOffsets(tgt, group)
	if err != nil {
		return gs, fmt.Errorf("while reading the offsets of group %q on the target cluster: %w", group, err)
	}
	var last int64
	others := 0
	for _, parts := range blocksOf(resp) {
		for _, b := range parts {
			if !errors.Is(b.Err, sarama.ErrNoError) || b.Offset < 0 {
				continue
			}
			md, ok := mirror.ParseCheckpointMetadata(b.Metadata)
			if !ok || md.Mirror != cfg.ConsumerGroup {
				others++
				continue
			}
			gs.PartitionsTranslated++
			last = max(last, md.At)
		}
	}
	if last > 0 {
		// Whole seconds: the API server stores no more, and a status that differs from
		// its stored copy only below a second would be written at every reconcile.
		t := metav1.NewTime(time.Unix(last/1000, 0))
		gs.LastCheckpointTime = &t
	}
	switch {
	case members > 0:
		gs.State, gs.Reason = v1alpha1.GroupStateSkipped, v1alpha1.GroupReasonTargetGroupActive
		gs.Message = fmt.Sprintf("the target group has %d active members: the mirror never moves a live group (its consumers read the target already, or another application uses the name)", members)
	case gs.PartitionsTranslated > 0:
		gs.State, gs.Reason = v1alpha1.GroupStateCheckpointed, v1alpha1.GroupReasonCheckpointed
		gs.Message = fmt.Sprintf("the mirror committed translated offsets of %d partitions to the target group; its consumers can move to the target and resume there without skipping a record", gs.PartitionsTranslated)
	default:
		gs.State = v1alpha1.GroupStatePending
		gs.Reason, gs.Message, err = why.of(group, others)
	}
	return gs, err
}

// pendingReasons tells why a group has no checkpoint, reading the offset-sync topic's
// end at most once per sync.
type pendingReasons struct {
	cfg      *config.Config
	src, tgt *kafkaClient
	syncs    int64 // the offset-sync topic's end offset; -1 before it was read
	read     bool
}

// of returns the reason and message of a group without a checkpoint; others is the
// number of target partitions the group's own consumers committed.
func (p *pendingReasons) of(group string, others int) (string, string, error) {
	sel, err := topics.NewSelector(p.cfg.Topics)
	if err != nil {
		return "", "", fmt.Errorf("while compiling spec.topics: %w", err)
	}
	resp, err := fetchGroupOffsets(p.src.admin, group)
	if err != nil {
		return "", "", fmt.Errorf("while reading the offsets of group %q on the source cluster: %w", group, err)
	}
	mirrored := 0
	for topic, parts := range blocksOf(resp) {
		for _, b := range parts {
			if sel.Matches(topic) && errors.Is(b.Err, sarama.ErrNoError) && b.Offset >= 0 {
				mirrored++
			}
		}
	}
	if mirrored == 0 {
		return v1alpha1.GroupReasonNoSourceOffsets, "the source group has committed no offset of a mirrored topic: there is nothing to translate", nil
	}
	if !p.read {
		p.read, p.syncs = true, -1
		topic := mirror.OffsetSyncTopic(p.cfg.ConsumerGroup)
		if end, err := p.tgt.client.GetOffset(topic, 0, sarama.OffsetNewest); err == nil {
			p.syncs = end
		}
	}
	if p.syncs <= 0 {
		return v1alpha1.GroupReasonNoOffsetSyncs, fmt.Sprintf("the source group has offsets on %d mirrored partitions, but the mirror has written no offset sync to the target yet (%s): are its pods running?",
			mirrored, mirror.OffsetSyncTopic(p.cfg.ConsumerGroup)), nil
	}
	msg := fmt.Sprintf("the source group has offsets on %d mirrored partitions and the mirror writes offset syncs, but has not checkpointed the group yet: no sync at or below its offsets yet, or the first groups.syncInterval has not passed", mirrored)
	if others > 0 {
		msg = fmt.Sprintf("the target group's own consumers committed %d partitions; the mirror never moves them back, so it commits nothing while they are further than the translation", others)
	}
	return v1alpha1.GroupReasonNotCheckpointed, msg, nil
}

// fetchGroupOffsets reads every committed offset of group; a group that does not exist
// has none.
func fetchGroupOffsets(admin sarama.ClusterAdmin, group string) (*sarama.OffsetFetchResponse, error) {
	resp, err := admin.ListConsumerGroupOffsets(group, nil)
	if errors.Is(err, sarama.ErrGroupIDNotFound) {
		return nil, nil
	}
	if err == nil && resp != nil && !errors.Is(resp.Err, sarama.ErrNoError) && !errors.Is(resp.Err, sarama.ErrGroupIDNotFound) {
		err = resp.Err
	}
	return resp, err
}

func blocksOf(resp *sarama.OffsetFetchResponse) map[string]map[int32]*sarama.OffsetFetchResponseBlock {
	if resp == nil {
		return nil
	}
	return resp.Blocks
}

// nextGroupsStatus is status.groups after a topic sync that read res: absent without
// spec.groups; unchanged when the groups could not be read (the checkpoint times age,
// which shows it; the failure is logged).
func nextGroupsStatus(prev *v1alpha1.GroupsStatus, cfg *config.Config, res topicSyncResult) *v1alpha1.GroupsStatus {
	switch {
	case cfg == nil || cfg.Groups == nil:
		return nil
	case res.groupsErr != nil:
		return prev
	}
	return res.groups
}

// The operator's metrics for status.groups, beside kafka_mirror_operator_topic_lag:
// reported from the target cluster, so they go on while the mirror pods are down.
var (
	groupPartitionsTranslated = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kafka_mirror_operator_group_partitions_translated",
		Help: "Partitions of a consumer group whose offset on the target a KafkaMirror's checkpoint committed, as the operator read them at its last topic sync (the first 100 groups by name).",
	}, []string{"mirror_namespace", "mirror", "group"})
	groupLastCheckpoint = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kafka_mirror_operator_group_last_checkpoint_timestamp_seconds",
		Help: "When a KafkaMirror last committed or renewed a checkpoint of a consumer group on the target (Unix time, whole seconds); its age is time() minus this.",
	}, []string{"mirror_namespace", "mirror", "group"})
	groupStateCounts = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kafka_mirror_operator_groups",
		Help: "Consumer groups selected by a KafkaMirror's spec.groups, by checkpoint state after the last topic sync (state selected, checkpointed, skipped, pending).",
	}, []string{"mirror_namespace", "mirror", "state"})
	// groupActiveMembers lets an alert on checkpoint age leave out the groups the
	// mirror leaves alone on purpose (state Skipped, reason TargetGroupActive).
	groupActiveMembers = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kafka_mirror_operator_group_active_members",
		Help: "Members of a consumer group on a KafkaMirror's target cluster at the operator's last topic sync (the first 100 groups by name); while it is above 0 the mirror does not checkpoint the group.",
	}, []string{"mirror_namespace", "mirror", "group"})
	// groupCheckpointInterval lets an alert on checkpoint age scale with the mirror's
	// own intervals instead of a fixed threshold.
	groupCheckpointInterval = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "kafka_mirror_operator_group_checkpoint_interval_seconds",
		Help: "The longest a KafkaMirror's checkpoint times go unrenewed as the operator reports them while all is well: groups.syncInterval (the engine renews every checkpoint) plus topicSyncInterval (the operator reads them back).",
	}, []string{"mirror_namespace", "mirror"})
)

func init() {
	metrics.Registry.MustRegister(groupPartitionsTranslated, groupLastCheckpoint, groupStateCounts, groupActiveMembers, groupCheckpointInterval)
}

// reportGroups replaces the group series of m with what st and cfg, its rendered
// config (nil when invalid), say; a mirror without spec.groups has none.
func reportGroups(m *v1alpha1.KafkaMirror, st *v1alpha1.KafkaMirrorStatus, cfg *config.Config) {
	forgetGroups(m.Namespace, m.Name)
	gs := st.Groups
	if gs == nil {
		return
	}
	if cfg != nil && cfg.Groups != nil {
		groupCheckpointInterval.WithLabelValues(m.Namespace, m.Name).Set((cfg.Groups.SyncInterval.Duration + cfg.TopicSyncInterval.Duration).Seconds())
	}
	for state, n := range map[string]int32{"selected": gs.Selected, "checkpointed": gs.Checkpointed, "skipped": gs.Skipped, "pending": gs.Pending} {
		groupStateCounts.WithLabelValues(m.Namespace, m.Name, state).Set(float64(n))
	}
	for _, g := range gs.Items {
		groupPartitionsTranslated.WithLabelValues(m.Namespace, m.Name, g.Name).Set(float64(g.PartitionsTranslated))
		groupActiveMembers.WithLabelValues(m.Namespace, m.Name, g.Name).Set(float64(g.ActiveMembers))
		if g.LastCheckpointTime != nil {
			groupLastCheckpoint.WithLabelValues(m.Namespace, m.Name, g.Name).Set(float64(g.LastCheckpointTime.Unix()))
		}
	}
}

// forgetGroups drops the group series of a KafkaMirror.
func forgetGroups(namespace, name string) {
	labels := prometheus.Labels{"mirror_namespace": namespace, "mirror": name}
	groupPartitionsTranslated.DeletePartialMatch(labels)
	groupLastCheckpoint.DeletePartialMatch(labels)
	groupStateCounts.DeletePartialMatch(labels)
	groupActiveMembers.DeletePartialMatch(labels)
	groupCheckpointInterval.DeletePartialMatch(labels)
}
