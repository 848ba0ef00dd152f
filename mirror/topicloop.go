package mirror

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/topics"
)

// topicSet is the sorted list of selected source topics the streams consume and their
// topic IDs, with a channel closed whenever either changes so a stream can restart its
// Consume call: a topic whose ID changed was deleted and created again, and a new
// session must judge the stored positions against the new ID (incarnation.go).
type topicSet struct {
	mu      sync.Mutex
	list    []string
	ids     map[string]string
	changed chan struct{}
}

func newTopicSet() topicSet { return topicSet{changed: make(chan struct{}), ids: map[string]string{}} }

func (s *topicSet) get() ([]string, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.list, s.changed
}

// topicIDs returns the known IDs of the selected topics (a copy).
func (s *topicSet) topicIDs() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.ids)
}

// set publishes list and reports whether it differs from the current one. ids, when
// not nil, are the topics' IDs as just read: a topic whose ID differs from the one
// known before counts as a change too (recreated names those topics).
func (s *topicSet) set(list []string, ids map[string]string) (changed bool, recreated []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	changed = !slices.Equal(s.list, list)
	if ids != nil {
		for _, t := range list {
			if old, ok := s.ids[t]; ok && ids[t] != "" && old != ids[t] {
				recreated = append(recreated, t)
			}
		}
		s.ids = ids
	}
	if !changed && len(recreated) == 0 {
		return false, nil
	}
	s.list = list
	close(s.changed)
	s.changed = make(chan struct{})
	return changed, recreated
}

// topicLoop syncs target topics (when syncTopics is on) and re-selects source topics
// at start and every topicSyncInterval.
type topicLoop struct {
	e      *Engine
	conns  *connections
	syncer *topics.Syncer
	// warnedEmpty avoids repeating the empty-selection line every interval.
	warnedEmpty bool
	// hidden holds the include expressions last reported hidden by the source's ACLs
	// (topics.HiddenIncludes), so each is logged once until it changes.
	hidden map[string]string
}

func newTopicLoop(e *Engine, conns *connections) (*topicLoop, error) {
	tl := &topicLoop{e: e, conns: conns}
	if e.cfg.SyncTopicsEnabled() {
		opts, err := topics.OptionsFor(e.cfg)
		if err != nil {
			return nil, fmt.Errorf("while preparing the topic sync: %w", err)
		}
		opts.Logger = e.log.WithName("topics")
		tl.syncer = topics.NewSyncer(conns.sourceAdmin, conns.targetAdmin, e.sel, opts)
	}
	return tl, nil
}

// runOnce does one sync and selection. At start its errors are returned (the user sees
// unreachable clusters at once); later ones are logged and retried next interval.
func (tl *topicLoop) runOnce(ctx context.Context) error {
	if tl.syncer != nil {
		rep, err := tl.syncer.Sync(ctx)
		if err != nil {
			return err
		}
		for _, t := range rep.Topics {
			if t.Err != nil {
				tl.e.log.Error(t.Err, "Failed to sync target topic", "topic", t.Source, "targetTopic", t.Target, "action", t.Action)
			}
		}
		if rep.Created+rep.Expanded+rep.ConfigsUpdated > 0 {
			tl.e.log.Info("Synced target topics", "selected", rep.Selected, "created", rep.Created,
				"expanded", rep.Expanded, "configsUpdated", rep.ConfigsUpdated, "configsRefused", rep.ConfigsRefused, "configsFailed", rep.ConfigsFailed,
				"inSync", rep.InSync, "targetHasMore", rep.Mismatched, "failed", rep.Failed)
		}
	}
	if err := tl.conns.sourceMeta.RefreshMetadata(); err != nil {
		return fmt.Errorf("while reading the source cluster's topics: %w", err)
	}
	all, err := tl.conns.sourceMeta.Topics()
	if err != nil {
		return fmt.Errorf("while reading the source cluster's topics: %w", err)
	}
	selected := tl.e.sel.Select(all)
	ids, err := sourceTopicIDs(ctx, tl.conns.sourceAdmin, selected)
	if err != nil {
		// Known IDs are kept; positions are judged against them until the next read.
		tl.e.log.Error(err, "Failed to read the source topics' IDs; a topic re-created meanwhile is noticed at the next topic sync")
		ids = nil
	}
	changed, recreated := tl.e.topics.set(selected, ids)
	for _, t := range recreated {
		tl.e.log.Info("Warning: a source topic was deleted and created again while mirrored; its partitions are assigned anew and start at the new topic's beginning",
			"topic", t, "topicId", ids[t])
	}
	if changed || (len(selected) == 0 && !tl.warnedEmpty) {
		if len(selected) == 0 {
			tl.warnedEmpty = true
			tl.e.log.Info("No source topic matches the selection; waiting for one to appear",
				"include", tl.e.cfg.Topics.Include, "exclude", tl.e.cfg.Topics.Exclude, "sourceTopics", len(all))
		} else {
			tl.e.log.Info("Selected source topics", "topics", selected)
		}
	}
	if len(selected) > 0 {
		tl.warnedEmpty = false
	}
	tl.checkHidden(all)
	// The producers size their batches by these (sizeLimits); a failure keeps the
	// limits known so far, and records to a topic of unknown limit go one at a time.
	if err := tl.e.sender.readLimits(tl.conns.targetAdmin, tl.e.targetTopicNames()); err != nil && ctx.Err() == nil {
		tl.e.log.Error(err, "Failed to read the target topics' max.message.bytes; sending records of topics with unknown limits one at a time")
	}
	return nil
}

// checkHidden asks the source about the include expressions that select no listed
// topic (topics.HiddenIncludes): Kafka leaves out the topics the principal may not
// Describe, so a missing Describe ACL would otherwise look like a topic that does not
// exist. Each refusal is logged once as an error naming the principal, the operation and
// the topic, and is part of Ready's answer while nothing is selected.
func (tl *topicLoop) checkHidden(listed []string) {
	hidden, err := topics.HiddenIncludes(tl.conns.sourceMeta, tl.e.sel, listed)
	if err != nil {
		tl.e.log.Error(err, "Failed to ask the source whether topics.include names topics hidden by its ACLs; asking again next interval")
		return
	}
	principal := kafka.Principal(tl.e.cfg.Source)
	now := make(map[string]string, len(hidden))
	msgs := make([]string, 0, len(hidden))
	for _, h := range hidden {
		msg := h.Describe(principal)
		now[h.Pattern] = msg
		msgs = append(msgs, msg)
		if tl.hidden[h.Pattern] != msg {
			tl.e.log.Error(sarama.ErrTopicAuthorizationFailed, "Source topics may be hidden by the source's ACLs: "+msg,
				"include", h.Pattern, "topic", h.Name, "operation", "DESCRIBE", "resourceType", "TOPIC", "principal", principal)
		}
	}
	tl.hidden = now
	tl.e.hiddenTopics.Store(strings.Join(msgs, "; "))
}

func (tl *topicLoop) run(ctx context.Context) {
	t := time.NewTicker(tl.e.cfg.TopicSyncInterval.Duration)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := tl.runOnce(ctx); err != nil && ctx.Err() == nil {
				tl.e.log.Error(err, "Failed to sync and select topics; retrying next interval")
			}
		}
	}
}

// targetTopicNames returns the target names of the selected source topics.
func (e *Engine) targetTopicNames() []string {
	list, _ := e.topics.get()
	out := make([]string, 0, len(list))
	for _, t := range list {
		out = append(out, e.sel.TargetName(t))
	}
	return out
}
