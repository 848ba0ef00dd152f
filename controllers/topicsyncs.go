package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
)

// Bounds of the operator's Kafka work. A cluster that accepts connections and never
// answers holds a sarama call until its read timeouts (tens of seconds, longer than a
// reconcile may take), so topic syncs run off the reconcile workers, a bounded number
// per pair of clusters, each under a deadline.
const (
	// kafkaSyncTimeout bounds one topic sync: connect to both clusters, list, create or
	// expand, read lag. Past it the sync is reported as failed and its clients dropped.
	kafkaSyncTimeout = 20 * time.Second
	// kafkaSyncsPerClusters is how many topic syncs run at once against one pair of
	// source and target clusters; the rest of that pair's syncs wait in line, and
	// other pairs are not affected.
	kafkaSyncsPerClusters = 4
	// kafkaWaitOnWorker is how long a reconcile waits for a sync it has just started
	// (not one queued behind others), so that a spec change on a healthy cluster is
	// reported in the same reconcile.
	kafkaWaitOnWorker = 250 * time.Millisecond
)

// topicSyncs runs the topic syncs of every KafkaMirror off the reconcile workers. A
// reconcile asks for the latest result; a new sync starts only when the sync input
// (mirror.yaml and the credentials) changed, the sync interval has passed, or the
// previous sync failed and its retry delay has passed; never because a child object
// changed. A finished sync enqueues its KafkaMirror through done.
type topicSyncs struct {
	clients *kafkaClients
	done    chan event.GenericEvent
	log     logr.Logger

	timeout     time.Duration
	wait        time.Duration
	perClusters int
	now         func() time.Time

	mu    sync.Mutex
	state map[types.NamespacedName]*syncState
	slots map[string]chan struct{}
}

// syncState is one KafkaMirror's latest sync.
type syncState struct {
	// uid is the KafkaMirror's: the state of a deleted one is never used for another
	// created under the same name.
	uid types.UID
	// input digests what the latest requested sync works from.
	input string
	// running is closed when the running sync ends; nil when none runs. queued is true
	// while it waits for a slot.
	running chan struct{}
	queued  bool
	// waiters counts the reconciles waiting for the running sync: when one is, it
	// reports the result, and the sync's end enqueues nothing.
	waiters int
	// result is the latest finished sync's, for input when have is true.
	result   topicSyncResult
	have     bool
	at       time.Time
	failures int
	// reported is set once a reconcile has seen result.
	reported bool
}

func newTopicSyncs(clients *kafkaClients, log logr.Logger) *topicSyncs {
	return &topicSyncs{
		clients:     clients,
		log:         log,
		done:        make(chan event.GenericEvent, 1024),
		timeout:     kafkaSyncTimeout,
		wait:        kafkaWaitOnWorker,
		perClusters: kafkaSyncsPerClusters,
		now:         time.Now,
		state:       map[types.NamespacedName]*syncState{},
		slots:       map[string]chan struct{}{},
	}
}

// syncRequest is everything a topic sync works from apart from the credentials. It is
// made from the spec in one place (syncRequestFor), and the sync reads nothing else of
// the KafkaMirror, so that the sync input, its digest, covers every spec field that
// changes what the sync does: changing one starts a new sync, and a result computed
// for another request is never reported for this one.
type syncRequest struct {
	// Config is the rendered engine config: clusters, topics selection, renames,
	// replication factor, config sync, consumer group (for lag) and groups.
	Config *config.Config `json:"config"`
	// DryRun is spec.syncPartitions false: report what differs, change nothing.
	DryRun bool `json:"dryRun"`
}

// syncRequestFor is the sync request of m, whose rendered config is cfg.
func syncRequestFor(m *v1alpha1.KafkaMirror, cfg *config.Config) syncRequest {
	return syncRequest{Config: cfg, DryRun: m.Spec.SyncPartitions != nil && !*m.Spec.SyncPartitions}
}

// syncInput digests what a topic sync works from: the request (as JSON, several times
// cheaper than rendering mirror.yaml) and the credentials.
func syncInput(req syncRequest, files secretFiles) (string, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return "", fmt.Errorf("while digesting the topic sync request: %w", err)
	}
	return configHash(b, files), nil
}

// observe returns m's latest topic sync result (ran false when there is none for the
// current input, or for this KafkaMirror's UID, yet), starting a sync when one is due, and how long until the next
// one is due. fresh is true for the first reconcile that sees a result.
func (s *topicSyncs) observe(ctx context.Context, m *v1alpha1.KafkaMirror, cfg *config.Config, files secretFiles) (res topicSyncResult, ran, fresh bool, next time.Duration, err error) {
	req := syncRequestFor(m, cfg)
	input, err := syncInput(req, files)
	if err != nil {
		return topicSyncResult{}, false, false, 0, err
	}
	key := client.ObjectKeyFromObject(m)
	interval := cfg.TopicSyncInterval.Duration

	s.mu.Lock()
	st, ok := s.state[key]
	if !ok || st.uid != m.UID {
		// A KafkaMirror deleted and created again under the same name (with no reconcile
		// in between to forget it) starts afresh; a sync still running for the old one
		// records its result in the state dropped here.
		st = &syncState{uid: m.UID}
		s.state[key] = st
	}
	if st.input != input {
		st.input, st.have, st.failures = input, false, 0
	}
	if st.running == nil && s.dueLocked(st, interval) {
		s.startLocked(key, st, m, req, files)
	}
	// Wait only for a sync of a new input (a spec or credential change, a new
	// KafkaMirror): a re-sync on the timer reports the result it has, and its end
	// enqueues m only when the outcome differs. Waiting on every timer re-sync would
	// tie up the workers whenever syncs are slow.
	running, wait := st.running, st.running != nil && !st.queued && !st.have
	if wait {
		st.waiters++
	}
	s.mu.Unlock()

	if wait {
		t := time.NewTimer(s.wait)
		select {
		case <-running:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	if wait {
		st.waiters--
	}
	if !st.have {
		return topicSyncResult{}, false, false, interval, nil
	}
	fresh, st.reported = !st.reported, true
	next = interval
	switch {
	case st.running != nil:
		// The sync's end enqueues m; this is a fallback.
	case st.result.err != nil:
		next = retryDelay(st.failures) - s.now().Sub(st.at)
	default:
		next = interval - s.now().Sub(st.at)
	}
	return st.result, true, fresh, max(next, minRetryDelay), nil
}

// dueLocked tells whether st needs a new sync.
func (s *topicSyncs) dueLocked(st *syncState, interval time.Duration) bool {
	age := s.now().Sub(st.at)
	switch {
	case !st.have:
		return true
	case st.result.err != nil:
		return age >= retryDelay(st.failures)
	}
	// The timer's reconcile was scheduled from the start of the previous sync's
	// reconcile, a little before that sync ended: a tenth of slack keeps it due.
	return age >= interval-interval/10
}

// retryDelay is the delay before retrying after failures failed syncs in a row.
func retryDelay(failures int) time.Duration {
	d := minRetryDelay
	for i := 1; i < failures && d < maxRetryDelay; i++ {
		d *= 2
	}
	return min(d, maxRetryDelay)
}

// startLocked starts a sync of m in the background.
func (s *topicSyncs) startLocked(key types.NamespacedName, st *syncState, m *v1alpha1.KafkaMirror, req syncRequest, files secretFiles) {
	cfg := req.Config
	pair := strings.Join(cfg.Source.BootstrapServers, ",") + "|" + strings.Join(cfg.Target.BootstrapServers, ",")
	slot, ok := s.slots[pair]
	if !ok {
		slot = make(chan struct{}, s.perClusters)
		s.slots[pair] = slot
	}
	done := make(chan struct{})
	st.running = done
	select {
	case slot <- struct{}{}:
		st.queued = false
	default:
		st.queued = true
	}
	// The sync's end enqueues m: its identity is all it needs of the object.
	ref := &v1alpha1.KafkaMirror{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name, UID: m.UID}}
	go s.run(key, st, ref, req, files, st.input, slot, st.queued, done)
}

// run does one sync and records its result.
func (s *topicSyncs) run(key types.NamespacedName, st *syncState, m *v1alpha1.KafkaMirror, req syncRequest, files secretFiles,
	input string, slot chan struct{}, queued bool, done chan struct{}) {
	if queued {
		slot <- struct{}{}
		s.mu.Lock()
		st.queued = false
		s.mu.Unlock()
	}
	base := logr.NewContext(context.Background(), s.log.WithValues("KafkaMirror", key))
	ctx, cancel := context.WithTimeout(base, s.timeout)
	defer cancel()
	w := &syncWork{}
	results := make(chan topicSyncResult, 1)
	go func() {
		// The slot is held until the work really ends, even past the deadline, so a
		// hanging cluster never has more than perClusters calls stuck on it.
		defer func() { <-slot }()
		results <- w.do(ctx, s.clients, key, req, files)
	}()
	var res topicSyncResult
	select {
	case res = <-results:
	case <-ctx.Done():
		res = topicSyncResult{role: w.role(),
			err: fmt.Errorf("the %s cluster did not answer within %s", w.role(), s.timeout)}
		w.abandon(s.clients)
	}

	s.mu.Lock()
	// A reconcile waiting for this sync reports it; otherwise m is enqueued for it,
	// unless it repeats what status already shows (a re-sync that found nothing new).
	// A sync for an input that changed meanwhile enqueues m to start the next one.
	notify := st.waiters == 0
	if st.input == input {
		same := st.have && st.reported && sameOutcome(st.result, res)
		if same {
			notify = false
		}
		st.result, st.have, st.at, st.reported = res, true, s.now(), same
		if res.err != nil {
			st.failures++
		} else {
			st.failures = 0
		}
	}
	st.running = nil
	close(done)
	s.mu.Unlock()
	if notify {
		s.done <- event.GenericEvent{Object: m}
	}
}

// sameOutcome tells whether a sync found what the previous one found, as far as status
// and events show it.
func sameOutcome(prev, next topicSyncResult) bool {
	if (prev.err == nil) != (next.err == nil) {
		return false
	}
	if next.err != nil {
		return prev.role == next.role && prev.err.Error() == next.err.Error()
	}
	return topicChanges(next) == "" && equality.Semantic.DeepEqual(topicsStatus(prev), topicsStatus(next)) &&
		equality.Semantic.DeepEqual(prev.groups, next.groups)
}

// forget drops what is known about a deleted KafkaMirror.
func (s *topicSyncs) forget(key types.NamespacedName) {
	s.mu.Lock()
	delete(s.state, key)
	s.mu.Unlock()
	s.clients.forget(key)
}

// syncWork is one sync's progress, so that a sync past its deadline names the cluster
// it was waiting for and drops the clients it holds.
type syncWork struct {
	phase atomic.Value // string: the role being waited for
	mu    sync.Mutex
	held  []*kafkaClient
}

func (w *syncWork) role() string {
	if r, ok := w.phase.Load().(string); ok {
		return r
	}
	return kafka.RoleSource
}

func (w *syncWork) hold(e *kafkaClient) {
	w.mu.Lock()
	w.held = append(w.held, e)
	w.mu.Unlock()
}

// abandon drops the clients of a sync past its deadline: closing them ends the calls
// still waiting on them.
func (w *syncWork) abandon(k *kafkaClients) {
	w.mu.Lock()
	held := append([]*kafkaClient(nil), w.held...)
	w.mu.Unlock()
	for _, e := range held {
		k.discard(e)
	}
}

func (w *syncWork) do(ctx context.Context, k *kafkaClients, key types.NamespacedName, req syncRequest, files secretFiles) topicSyncResult {
	cfg := req.Config
	w.phase.Store(kafka.RoleSource)
	src, err := k.acquire(key, cfg.Source, kafka.RoleSource, files)
	if err != nil {
		return topicSyncResult{err: err, role: kafka.RoleSource}
	}
	w.hold(src)
	w.phase.Store(kafka.RoleTarget)
	tgt, err := k.acquire(key, cfg.Target, kafka.RoleTarget, files)
	if err != nil {
		k.release(src, false)
		return topicSyncResult{err: err, role: kafka.RoleTarget}
	}
	w.hold(tgt)
	w.phase.Store(kafka.RoleSource)
	res := syncTopics(ctx, req, src, tgt)
	k.release(src, res.err != nil && res.role == kafka.RoleSource)
	k.release(tgt, res.err != nil && res.role == kafka.RoleTarget)
	return res
}
