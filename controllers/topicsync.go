package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/IBM/sarama"
	"github.com/go-logr/logr"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/topics"
)

// Timeouts of the operator's Kafka clients. A reconcile must not hang on an unreachable
// cluster: it reports the cause and retries with backoff instead.
const (
	kafkaDialTimeout    = 10 * time.Second
	kafkaRequestTimeout = 15 * time.Second
)

// topicSyncResult is what the topic sync step found. err is set when a cluster could
// not be reached or listed at all; role then says which (kafka.RoleSource or
// kafka.RoleTarget).
type topicSyncResult struct {
	report topics.Report
	dryRun bool
	// lag holds the consumer group's lag per source topic, for the topics listed in
	// status; a topic is absent when its lag could not be read.
	lag map[string]int64
	// sample sums the offsets the lag was read from, for the autoscaler; nil when the
	// lag could not be read.
	sample *lagSample
	err    error
	role   string

	// groups is status.groups as read at this sync (nil without spec.groups);
	// groupsErr says why it could not be read (see groupstatus.go).
	groups    *v1alpha1.GroupsStatus
	groupsErr error
}

// syncTopics runs the engine's topic Syncer against the real clusters: missing targets
// are created with the source's partition count and smaller targets expanded (unless
// spec.syncPartitions is false, when nothing changes and the differences are reported).
// It works from req alone (see syncRequest). src and tgt are cached clients (see
// kafkaClients), connected exactly as the pods connect.
func syncTopics(ctx context.Context, req syncRequest, src, tgt *kafkaClient) topicSyncResult {
	log := logr.FromContextOrDiscard(ctx)
	cfg := req.Config
	res := topicSyncResult{dryRun: req.DryRun}
	sel, err := topics.NewSelector(cfg.Topics)
	if err != nil { // validate already compiled these; keep the error rather than panic
		res.err = fmt.Errorf("while compiling spec.topics: %w", err)
		return res
	}
	opts, err := topics.OptionsFor(cfg)
	if err != nil { // validate already compiled these too
		res.err = fmt.Errorf("while compiling spec.topics.configExclude: %w", err)
		return res
	}
	srcClient, srcAdmin, tgtAdmin := src.client, src.admin, tgt.admin

	opts.DryRun = res.dryRun
	// A Syncer lives for one reconcile here, so its "say it once" logging would repeat
	// every interval: its lines go to debug, and changes are logged below.
	opts.Logger = log.V(1)
	syncer := topics.NewSyncer(srcAdmin, tgtAdmin, sel, opts)
	res.report, err = syncer.Sync(ctx)
	if err != nil {
		res.err, res.role = err, syncErrorRole(err)
		return res
	}

	if changes := topicChanges(res); changes != "" {
		log.Info("Synced target topics", "changes", changes)
	}
	if res.groups, res.groupsErr = readGroupCheckpoints(cfg, src, tgt); res.groupsErr != nil {
		// Like lag, for people reading status: the groups' checkpoint times age meanwhile.
		log.Info("Failed to read consumer group checkpoints", "error", res.groupsErr.Error())
	}

	names := make([]string, 0, min(len(res.report.Topics), v1alpha1.MaxTopicStatuses))
	for _, t := range res.report.Topics[:min(len(res.report.Topics), v1alpha1.MaxTopicStatuses)] {
		if t.Action != topics.ActionFailed {
			names = append(names, t.Source)
		}
	}
	var lagOpts []topics.LagOption
	if cfg.InitialOffset == config.InitialOffsetLatest {
		// A partition the mirror has not committed starts at its end: its older records
		// are no lag, as the engine reports it too.
		lagOpts = append(lagOpts, topics.WithUncommittedFromEnd())
	}
	lags, err := topics.Lag(ctx, srcAdmin, srcClient, cfg.ConsumerGroup, names, lagOpts...)
	if err != nil {
		// Lag is for people reading status; a failure to read it changes nothing else.
		log.V(1).Info("Failed to read consumer group lag", "group", cfg.ConsumerGroup, "error", err.Error())
		return res
	}
	res.lag = make(map[string]int64, len(lags))
	res.sample = &lagSample{at: time.Now()}
	for t, parts := range lags {
		var sum int64
		for _, p := range parts {
			sum += p.Lag
			res.sample.end += p.HighWatermark
		}
		res.lag[t] = sum
		res.sample.lag += sum
		res.sample.partitions += int32(len(parts))
	}
	return res
}

// syncErrorRole says which cluster a Sync error is about: the one a *topics.ClusterError
// names; anything else (a context that ended) counts against the source, where the
// sync starts.
func syncErrorRole(err error) string {
	var ce *topics.ClusterError
	if errors.As(err, &ce) {
		return ce.Role
	}
	return kafka.RoleSource
}

// connect opens a client and an admin (sharing the client's connections) to one
// cluster, with timeouts short enough for a reconcile.
func connect(cl config.Cluster, role string, files secretFiles) (sarama.Client, sarama.ClusterAdmin, error) {
	opts := []kafka.Option{kafka.WithRole(role), kafka.WithFileReader(files.read)}
	sc, err := kafka.NewConfig(cl, opts...)
	if err != nil {
		return nil, nil, err
	}
	sc.Net.DialTimeout = kafkaDialTimeout
	sc.Net.ReadTimeout = kafkaRequestTimeout
	sc.Net.WriteTimeout = kafkaRequestTimeout
	sc.Metadata.Timeout = kafkaRequestTimeout
	sc.Metadata.Retry.Max = 1
	sc.Admin.Timeout = kafkaRequestTimeout
	client, err := kafka.NewClientFromConfig(cl, sc, opts...)
	if err != nil {
		return nil, nil, err
	}
	admin, err := sarama.NewClusterAdminFromClient(client)
	if err != nil {
		_ = client.Close()
		return nil, nil, fmt.Errorf("while creating the %s cluster admin: %w", role, err)
	}
	return client, admin, nil
}

// topicsStatus turns a sync result into status.topics, capped at MaxTopicStatuses items.
func topicsStatus(res topicSyncResult) *v1alpha1.TopicsStatus {
	rep := res.report
	out := &v1alpha1.TopicsStatus{Selected: int32(rep.Selected), Failed: int32(rep.Failed)}
	for i, t := range rep.Topics {
		state, msg := topicStateOf(t, res.dryRun)
		switch state {
		case v1alpha1.TopicStateInSync:
			out.InSync++
		case v1alpha1.TopicStateMismatched, v1alpha1.TopicStateMissing:
			out.Mismatched++
		}
		if i >= v1alpha1.MaxTopicStatuses {
			continue
		}
		ts := v1alpha1.TopicStatus{
			Source: t.Source, Target: t.Target,
			SourcePartitions: t.SourcePartitions, TargetPartitions: t.TargetPartitions,
			SourceTopicID: t.SourceTopicID, State: state, Message: msg,
		}
		if lag, ok := res.lag[t.Source]; ok {
			ts.Lag = &lag
		}
		out.Items = append(out.Items, ts)
	}
	return out
}

// topicStateOf maps what the Syncer did for a topic to its state in status. With
// dryRun (syncPartitions false) "created" and "expanded" mean the sync would have had to.
func topicStateOf(t topics.TopicState, dryRun bool) (v1alpha1.TopicState, string) {
	switch {
	case t.Action == topics.ActionFailed:
		msg := "the topic could not be synced"
		if t.Err != nil {
			msg = t.Err.Error()
		}
		return v1alpha1.TopicStateFailed, msg
	case t.Action == topics.ActionTargetHasMore:
		return v1alpha1.TopicStateMismatched, "the target has more partitions than the source; partitions cannot be removed, so this is reported only"
	case dryRun && t.Action == topics.ActionCreated:
		return v1alpha1.TopicStateMissing, "the target topic does not exist and syncPartitions is false; the mirror waits for it"
	case dryRun && t.Action == topics.ActionExpanded:
		return v1alpha1.TopicStateMismatched, "the target has fewer partitions than the source and syncPartitions is false; the mirror waits for the missing partitions"
	}
	// In sync, or created or expanded just now; configs not synced are told.
	return v1alpha1.TopicStateInSync, configMessage(t)
}

// configMessage tells why a topic's configs are not (all) synced, for status; "" when
// they are. The topic is mirrored either way.
func configMessage(t topics.TopicState) string {
	var parts []string
	if t.ConfigErr != nil {
		parts = append(parts, "its configs could not be synced: "+t.ConfigErr.Error())
	}
	if len(t.RefusedConfigs) > 0 {
		refused := make([]string, 0, len(t.RefusedConfigs))
		for _, r := range t.RefusedConfigs {
			refused = append(refused, r.String())
		}
		parts = append(parts, "the target refused the source configs "+strings.Join(refused, ", "))
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, "; ") + "; the topic is mirrored without them"
}

// topicChanges describes the topics a sync created or expanded, for an event; "" when
// it changed nothing.
func topicChanges(res topicSyncResult) string {
	if res.dryRun {
		return ""
	}
	var parts []string
	for _, t := range res.report.Topics {
		switch t.Action {
		case topics.ActionCreated:
			parts = append(parts, fmt.Sprintf("created %s with %d partitions", t.Target, t.TargetPartitions))
		case topics.ActionExpanded:
			parts = append(parts, fmt.Sprintf("expanded %s to %d partitions", t.Target, t.TargetPartitions))
		}
	}
	const shown = 10
	if len(parts) > shown {
		parts = append(parts[:shown], fmt.Sprintf("and %d more", len(parts)-shown))
	}
	return strings.Join(parts, ", ")
}
