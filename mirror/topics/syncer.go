package topics

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/IBM/sarama"
	"github.com/go-logr/logr"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
)

// Actions a Sync took (or, with DryRun, would take) for one topic. The values are
// PascalCase so that the operator can show them in status as they are.
const (
	// ActionNone means the target topic exists with the source's partition count.
	ActionNone = "InSync"
	// ActionCreated means the target topic was missing and was created with the
	// source's partition count.
	ActionCreated = "Created"
	// ActionExpanded means the target topic had fewer partitions than the source and
	// partitions were added.
	ActionExpanded = "Expanded"
	// ActionTargetHasMore means the target topic has more partitions than the source.
	// It is reported and left alone: Kafka cannot remove partitions.
	ActionTargetHasMore = "TargetHasMore"
	// ActionFailed means the topic could not be described, created or expanded;
	// TopicState.Err holds the cause. (Configs that could not be synced do not fail a
	// topic: see TopicState.ConfigErr and RefusedConfigs.)
	ActionFailed = "Failed"
)

// SyncOptions tune a Syncer.
type SyncOptions struct {
	// SyncConfigs copies the topic configs set explicitly on a source topic that
	// ConfigFilter lets through to its target, at creation and afterwards whenever they
	// differ. Configs the target refuses are reported in TopicState.RefusedConfigs and
	// the others still applied.
	SyncConfigs bool
	// ConfigFilter chooses the copied configs; nil means config.DefaultTopicConfigExclude.
	ConfigFilter *ConfigFilter
	// ReplicationFactor is used for created target topics; -1 (or 0) means the source
	// topic's replication factor, capped at the number of target brokers.
	ReplicationFactor int16
	// DryRun computes the report and changes nothing: creations, expansions and config
	// changes are sent with validateOnly, so the target still checks them. Actions say
	// what would be done; TargetPartitions stays the current count (0 when missing).
	DryRun bool
	// Logger receives one line per change. The zero value discards.
	Logger logr.Logger
}

// OptionsFor returns the SyncOptions that a mirror config asks for: whether configs are
// copied, which, and the replication factor of created topics. The engine and the
// operator both use it, so that they sync topics alike; callers add DryRun and Logger.
func OptionsFor(cfg *config.Config) (SyncOptions, error) {
	filter, err := NewConfigFilter(cfg.Topics.ConfigExclude)
	if err != nil {
		return SyncOptions{}, err
	}
	if cfg.Topics.ConfigExclude == nil {
		filter = defaultConfigFilter
	}
	return SyncOptions{
		SyncConfigs:       cfg.SyncTopicConfigsEnabled(),
		ConfigFilter:      filter,
		ReplicationFactor: int16(cfg.Topics.ReplicationFactor), // Validate bounds it to int16
	}, nil
}

// Report is the outcome of one Sync.
type Report struct {
	// Topics holds one entry per selected source topic, sorted by source name.
	Topics []TopicState
	// Selected is the number of selected source topics, len(Topics).
	Selected int
	// InSync counts topics with ActionNone.
	InSync int
	// Created counts topics with ActionCreated.
	Created int
	// Expanded counts topics with ActionExpanded.
	Expanded int
	// Mismatched counts topics with ActionTargetHasMore.
	Mismatched int
	// Failed counts topics with ActionFailed.
	Failed int
	// ConfigsUpdated counts existing target topics whose configs were changed.
	ConfigsUpdated int
	// ConfigsRefused counts topics whose target refused some of the source's configs.
	ConfigsRefused int
	// ConfigsFailed counts topics whose configs could not be synced (ConfigErr).
	ConfigsFailed int
}

// TopicState is what a Sync found and did for one selected source topic.
type TopicState struct {
	// Source is the source topic name.
	Source string
	// Target is the target topic name after rename.
	Target string
	// SourcePartitions is the source topic's partition count.
	SourcePartitions int32
	// SourceTopicID is the source topic's ID: a new one means the topic was deleted
	// and created again ("" when the cluster gives none).
	SourceTopicID string
	// TargetPartitions is the target topic's partition count after the sync (0 when it
	// does not exist).
	TargetPartitions int32
	// Action is one of the Action constants; it is about the topic's existence and
	// partition count.
	Action string
	// ReplicationFactor is the replication factor a created target topic was given
	// (Action ActionCreated only; 0 otherwise).
	ReplicationFactor int16
	// UpdatedConfigs names the configs changed on an existing target topic, sorted.
	UpdatedConfigs []string
	// RefusedConfigs are the source configs the target refused, by name; the topic is
	// mirrored without them and they are tried again on the next sync.
	RefusedConfigs []RefusedConfig
	// ConfigErr is why the topic's configs could not be synced at all (a source or
	// target that may not describe or alter them, for example); the topic is still
	// created and expanded, and the configs are tried again on the next sync.
	ConfigErr error
	// Err is the cause when Action is ActionFailed.
	Err error
}

// Syncer keeps target topics in step with the selected source topics. A Syncer is
// meant to live as long as its caller and be called repeatedly; calls are serialised.
type Syncer struct {
	source, target sarama.ClusterAdmin
	sel            *Selector
	opts           SyncOptions
	log            logr.Logger

	mu sync.Mutex
	// reportedMore remembers which target-has-more mismatches were already logged, so a
	// periodic sync does not repeat the same line every interval.
	reportedMore map[string][2]int32
	// reportedRefused remembers, by target topic and config name, the refused values
	// already logged, for the same reason.
	reportedRefused map[string]map[string]string
	// brokers is the target's broker count, read at most once per Sync and only when a
	// topic is created with the source's replication factor; 0 when not read yet.
	brokers int
}

// NewSyncer returns a Syncer that reads topics through source and changes them through
// target. The admins stay owned by the caller.
func NewSyncer(source, target sarama.ClusterAdmin, sel *Selector, opts SyncOptions) *Syncer {
	if opts.ReplicationFactor <= 0 {
		opts.ReplicationFactor = -1
	}
	if opts.ConfigFilter == nil {
		opts.ConfigFilter = defaultConfigFilter
	}
	log := opts.Logger
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	return &Syncer{
		source: source, target: target, sel: sel, opts: opts, log: log,
		reportedMore: map[string][2]int32{}, reportedRefused: map[string]map[string]string{},
	}
}

// ClusterError is Sync's error when a whole cluster could not be listed or described:
// Role says which one (kafka.RoleSource or kafka.RoleTarget), so that a caller can tell
// "the source is down" from "the target is down" without reading the message.
type ClusterError struct {
	// Role is kafka.RoleSource or kafka.RoleTarget.
	Role string
	// Err is what failed, with its context.
	Err error
}

// Error returns Err's message, which already names the cluster.
func (e *ClusterError) Error() string { return e.Err.Error() }

// Unwrap returns Err, so that errors.Is finds sarama's and the network's errors.
func (e *ClusterError) Unwrap() error { return e.Err }

// topicInfo is one topic's partition count and replication factor from metadata, or
// the topic's error.
type topicInfo struct {
	partitions int32
	replicas   int16
	// id is the topic's ID (Kafka 2.8 and later), "" when the cluster gives none.
	id  string
	err error
}

// Sync brings every selected source topic's target in step: missing targets are
// created with the source's partition count, smaller targets are expanded, larger
// targets are reported. A failure for one topic is recorded in the Report and the
// others go on; Sync returns an error only when a cluster cannot be listed at all (a
// *ClusterError that says which) or ctx ends. Sync is idempotent.
func (s *Syncer) Sync(ctx context.Context) (Report, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.brokers = 0

	src, err := listTopics(s.source)
	if err != nil {
		return Report{}, &ClusterError{Role: kafka.RoleSource, Err: fmt.Errorf("while listing source topics: %w", err)}
	}
	names := make([]string, 0, len(src))
	for n := range src {
		names = append(names, n)
	}
	selected := s.sel.Select(names)

	tgt, err := listTopics(s.target)
	if err != nil {
		return Report{}, &ClusterError{Role: kafka.RoleTarget, Err: fmt.Errorf("while listing target topics: %w", err)}
	}

	var srcCfg, tgtCfg map[string]topicConfigs
	if s.opts.SyncConfigs {
		if srcCfg, err = describeConfigs(s.source, selected, s.opts.ConfigFilter); err != nil {
			return Report{}, &ClusterError{Role: kafka.RoleSource, Err: fmt.Errorf("while describing source topic configs: %w", err)}
		}
		var existing []string
		for _, n := range selected {
			if _, ok := tgt[s.sel.TargetName(n)]; ok {
				existing = append(existing, s.sel.TargetName(n))
			}
		}
		if tgtCfg, err = describeConfigs(s.target, existing, s.opts.ConfigFilter); err != nil {
			return Report{}, &ClusterError{Role: kafka.RoleTarget, Err: fmt.Errorf("while describing target topic configs: %w", err)}
		}
	}

	var rep Report
	for _, name := range selected {
		if err := ctx.Err(); err != nil {
			rep.count()
			return rep, fmt.Errorf("while syncing topics: %w", err)
		}
		targetName := s.sel.TargetName(name)
		t, exists := tgt[targetName]
		st := s.syncTopic(name, targetName, src[name], t, exists, srcCfg[name], tgtCfg[targetName])
		rep.Topics = append(rep.Topics, st)
	}
	rep.count()
	return rep, nil
}

// syncTopic syncs one topic; it never returns an error, only a state.
func (s *Syncer) syncTopic(name, targetName string, src, tgt topicInfo, exists bool, srcCfg, tgtCfg topicConfigs) TopicState {
	st := TopicState{Source: name, Target: targetName, SourcePartitions: src.partitions, SourceTopicID: src.id}
	fail := func(err error) TopicState {
		st.Action, st.Err = ActionFailed, err
		s.log.Error(err, "Failed to sync target topic", "topic", name, "targetTopic", targetName)
		return st
	}
	switch {
	case src.err != nil:
		return fail(fmt.Errorf("while describing source topic %q: %w", name, src.err))
	case exists && tgt.err != nil:
		return fail(fmt.Errorf("while describing target topic %q: %w", targetName, tgt.err))
	}

	// Configs are second to partitions: a topic whose configs cannot be read or
	// written is still created and expanded, so the mirror goes on, and ConfigErr says
	// why its configs are not synced.
	syncConfigs := s.opts.SyncConfigs
	configFailed := func(err error) {
		st.ConfigErr, syncConfigs = err, false
		s.log.Error(err, "Failed to sync target topic configs; the topic is mirrored with the configs it has",
			"topic", name, "targetTopic", targetName)
	}
	if syncConfigs && srcCfg.err != nil {
		configFailed(fmt.Errorf("while describing configs of source topic %q: %w", name, srcCfg.err))
	}

	if !exists {
		created, err := s.create(&st, src, srcCfg, syncConfigs)
		if err != nil {
			return fail(err)
		}
		if created {
			st.Action = ActionCreated
			if !s.opts.DryRun {
				st.TargetPartitions = src.partitions
			}
			s.noteRefused(st)
			return st
		}
		// Another syncer (a second replica, or the operator) created it first; carry on
		// with what is there now. Its configs are compared on the next sync.
		n, err := s.targetPartitions(targetName)
		if err != nil {
			return fail(err)
		}
		tgt = topicInfo{partitions: n}
	}

	st.TargetPartitions = tgt.partitions
	switch {
	case tgt.partitions < src.partitions:
		n, expanded, err := s.expand(name, targetName, tgt.partitions, src.partitions)
		switch {
		case err != nil:
			return fail(err)
		case expanded:
			st.Action = ActionExpanded
		case n == src.partitions:
			st.Action = ActionNone
		default:
			st.Action = ActionTargetHasMore
		}
		st.TargetPartitions = n
	case tgt.partitions > src.partitions:
		st.Action = ActionTargetHasMore
	default:
		st.Action = ActionNone
	}
	s.noteTargetHasMore(st)

	if syncConfigs && exists && tgtCfg.err != nil {
		configFailed(fmt.Errorf("while describing configs of target topic %q: %w", targetName, tgtCfg.err))
	}
	if syncConfigs && exists {
		updated, refused, err := s.updateConfigs(name, targetName, srcCfg, tgtCfg)
		if err != nil {
			configFailed(err)
		}
		st.UpdatedConfigs, st.RefusedConfigs = updated, refused
	}
	s.noteRefused(st)
	return st
}

// noteRefused logs the configs the target refused for one topic, each value once per
// Syncer, so a periodic sync does not repeat the same line every interval.
func (s *Syncer) noteRefused(st TopicState) {
	if len(st.RefusedConfigs) == 0 {
		delete(s.reportedRefused, st.Target)
		return
	}
	seen := s.reportedRefused[st.Target]
	if seen == nil {
		seen = map[string]string{}
		s.reportedRefused[st.Target] = seen
	}
	for _, r := range st.RefusedConfigs {
		if v, ok := seen[r.Name]; ok && v == r.Value {
			continue
		}
		seen[r.Name] = r.Value
		s.log.Error(r.Err, "Failed to apply a source topic config to its target; the topic is mirrored without it",
			"topic", st.Source, "targetTopic", st.Target, "config", r.Name, "value", r.Value)
	}
}

// noteTargetHasMore logs a target with more partitions than its source once per
// Syncer and pair of counts, so a periodic sync does not repeat the same line.
func (s *Syncer) noteTargetHasMore(st TopicState) {
	if st.Action != ActionTargetHasMore {
		delete(s.reportedMore, st.Target)
		return
	}
	key := [2]int32{st.SourcePartitions, st.TargetPartitions}
	if s.reportedMore[st.Target] == key {
		return
	}
	s.reportedMore[st.Target] = key
	s.log.Info("Found target topic with more partitions than its source; left it unchanged",
		"topic", st.Source, "targetTopic", st.Target, "sourcePartitions", st.SourcePartitions, "targetPartitions", st.TargetPartitions)
}

// create creates the target topic with the source's partition count, the replication
// factor of replicationFactor and the source's configs, leaving out the configs the
// target refuses (recorded in st.RefusedConfigs). It reports false, and no error, when
// the topic already exists because someone else created it since the listing.
func (s *Syncer) create(st *TopicState, src topicInfo, srcCfg topicConfigs, syncConfigs bool) (bool, error) {
	rf := s.replicationFactor(st, src)
	detail := func(configs map[string]string) *sarama.TopicDetail {
		d := &sarama.TopicDetail{NumPartitions: src.partitions, ReplicationFactor: rf}
		if len(configs) > 0 {
			d.ConfigEntries = make(map[string]*string, len(configs))
			for k, v := range configs {
				d.ConfigEntries[k] = &v
			}
		}
		return d
	}
	var configs map[string]string
	if syncConfigs {
		configs = srcCfg.explicit
	}
	err := s.target.CreateTopic(st.Target, detail(configs), s.opts.DryRun)
	if len(configs) > 0 && isConfigRefusal(err) {
		// Find the configs the target refuses, each alone in a validate-only create,
		// and create the topic with the rest: a topic without some configs mirrors,
		// a missing topic does not.
		var accepted map[string]string
		accepted, st.RefusedConfigs, err = splitRefused(configs, func(name, value string) error {
			return s.target.CreateTopic(st.Target, detail(map[string]string{name: value}), true)
		})
		if err == nil {
			configs = accepted
			err = s.target.CreateTopic(st.Target, detail(configs), s.opts.DryRun)
		}
	}
	switch {
	case errors.Is(err, sarama.ErrTopicAlreadyExists) && !s.opts.DryRun:
		st.RefusedConfigs = nil // compared afresh on the next sync
		return false, nil
	case err != nil:
		// Refused even without the refused configs: they were not the cause.
		st.RefusedConfigs = nil
		return false, fmt.Errorf("while creating target topic %q with %d partitions and replication factor %d: %w", st.Target, src.partitions, rf, err)
	}
	st.ReplicationFactor = rf
	if !s.opts.DryRun {
		kv := []any{"topic", st.Source, "targetTopic", st.Target, "partitions", src.partitions, "replicationFactor", rf}
		if len(configs) > 0 {
			kv = append(kv, "configs", sortedKeys(configs))
		}
		s.log.Info("Created target topic", kv...)
	}
	return true, nil
}

// replicationFactor is the replication factor of a new target topic: the configured
// one, else the source topic's capped at the target's broker count (a target smaller
// than the source cannot hold as many copies). A source whose factor is unknown leaves
// it to the target broker's default (-1), and so does a target whose brokers cannot be
// counted.
func (s *Syncer) replicationFactor(st *TopicState, src topicInfo) int16 {
	if s.opts.ReplicationFactor > 0 {
		return s.opts.ReplicationFactor
	}
	if src.replicas <= 0 {
		return -1
	}
	if s.brokers == 0 {
		brokers, _, err := s.target.DescribeCluster()
		if err != nil {
			// Creating the topic matters more than its exact factor.
			s.log.Error(err, "Failed to count the target's brokers; creating the topic with the target's default replication factor",
				"topic", st.Source, "targetTopic", st.Target)
			return -1
		}
		s.brokers = len(brokers)
	}
	if int(src.replicas) > s.brokers && s.brokers > 0 {
		if !s.opts.DryRun {
			s.log.Info("Capped the replication factor of a new target topic at the target's broker count",
				"topic", st.Source, "targetTopic", st.Target, "sourceReplicationFactor", src.replicas, "targetBrokers", s.brokers)
		}
		return int16(s.brokers)
	}
	return src.replicas
}

// expand adds partitions to the target topic and returns its partition count after.
// When another syncer expanded it meanwhile, it returns the count found now and
// expanded false.
func (s *Syncer) expand(name, targetName string, from, to int32) (int32, bool, error) {
	err := s.target.CreatePartitions(targetName, to, nil, s.opts.DryRun)
	switch {
	case errors.Is(err, sarama.ErrInvalidPartitions) && !s.opts.DryRun:
		n, derr := s.targetPartitions(targetName)
		if derr != nil || n < to {
			return 0, false, fmt.Errorf("while expanding target topic %q from %d to %d partitions: %w", targetName, from, to, err)
		}
		return n, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("while expanding target topic %q from %d to %d partitions: %w", targetName, from, to, err)
	}
	if s.opts.DryRun {
		return from, true, nil
	}
	s.log.Info("Expanded target topic", "topic", name, "targetTopic", targetName, "from", from, "to", to)
	return to, true, nil
}

// updateConfigs sets the target configs that differ from the source's explicit ones.
// When the target refuses the change, each config is tried alone: the accepted ones are
// applied and the refused ones returned, with no error.
func (s *Syncer) updateConfigs(name, targetName string, srcCfg, tgtCfg topicConfigs) ([]string, []RefusedConfig, error) {
	changes := configChanges(srcCfg, tgtCfg)
	if len(changes) == 0 {
		return nil, nil, nil
	}
	alter := func(configs map[string]string) error {
		entries := make(map[string]sarama.IncrementalAlterConfigsEntry, len(configs))
		for k, v := range configs {
			entries[k] = sarama.IncrementalAlterConfigsEntry{Operation: sarama.IncrementalAlterConfigsOperationSet, Value: &v}
		}
		return s.target.IncrementalAlterConfig(sarama.TopicResource, targetName, entries, s.opts.DryRun)
	}
	keys := sortedKeys(changes)
	applied, refused, err := changes, []RefusedConfig(nil), alter(changes)
	if isConfigRefusal(err) {
		// IncrementalAlterConfigs is all or nothing per topic: find the refused configs
		// one by one, applying the others on the way.
		applied, refused, err = splitRefused(changes, func(name, value string) error {
			return alter(map[string]string{name: value})
		})
	}
	if err != nil {
		return nil, nil, fmt.Errorf("while updating configs %v of target topic %q: %w", keys, targetName, err)
	}
	keys = nil
	if len(applied) > 0 {
		keys = sortedKeys(applied)
	}
	if !s.opts.DryRun && len(keys) > 0 {
		s.log.Info("Updated target topic configs", "topic", name, "targetTopic", targetName, "configs", keys)
	}
	return keys, refused, nil
}

// targetPartitions reads one target topic's partition count afresh.
func (s *Syncer) targetPartitions(targetName string) (int32, error) {
	md, err := s.target.DescribeTopics([]string{targetName})
	if err == nil && (len(md) != 1 || md[0].Name != targetName) {
		err = sarama.ErrIncompleteResponse
	}
	if err == nil && md[0].Err != sarama.ErrNoError {
		err = md[0].Err
	}
	if err != nil {
		return 0, fmt.Errorf("while describing target topic %q: %w", targetName, err)
	}
	return int32(len(md[0].Partitions)), nil
}

// listTopics reads every topic's partition count with one metadata request. It asks
// for metadata only: sarama's ListTopics also describes the configs of every topic in
// the cluster, which a periodic sync does not need.
func listTopics(admin sarama.ClusterAdmin) (map[string]topicInfo, error) {
	md, err := admin.DescribeTopics(nil)
	if err != nil {
		return nil, err
	}
	out := make(map[string]topicInfo, len(md))
	for _, t := range md {
		info := topicInfo{partitions: int32(len(t.Partitions))}
		if t.Uuid != (sarama.Uuid{}) {
			info.id = t.Uuid.String()
		}
		for _, p := range t.Partitions {
			info.replicas = max(info.replicas, int16(len(p.Replicas)))
		}
		if t.Err != sarama.ErrNoError {
			info.err = t.Err
		}
		out[t.Name] = info
	}
	return out, nil
}

func (r *Report) count() {
	sort.Slice(r.Topics, func(i, j int) bool { return r.Topics[i].Source < r.Topics[j].Source })
	r.Selected, r.InSync, r.Created, r.Expanded, r.Mismatched, r.Failed, r.ConfigsUpdated, r.ConfigsRefused, r.ConfigsFailed = len(r.Topics), 0, 0, 0, 0, 0, 0, 0, 0
	for _, t := range r.Topics {
		switch t.Action {
		case ActionNone:
			r.InSync++
		case ActionCreated:
			r.Created++
		case ActionExpanded:
			r.Expanded++
		case ActionTargetHasMore:
			r.Mismatched++
		case ActionFailed:
			r.Failed++
		}
		if len(t.UpdatedConfigs) > 0 {
			r.ConfigsUpdated++
		}
		if len(t.RefusedConfigs) > 0 {
			r.ConfigsRefused++
		}
		if t.ConfigErr != nil {
			r.ConfigsFailed++
		}
	}
}
