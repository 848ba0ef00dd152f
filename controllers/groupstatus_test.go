package controllers

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/prometheus/client_golang/prometheus"
	promtestutil "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/jsonpath"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// TestGroupCheckpointStatus runs the real engine in-process on the config the operator
// renders, and checks that status.groups and the operator's group metrics report the
// checkpoints the engine committed to the target:
//   - before the engine runs, a source group with offsets is Pending/NoOffsetSyncs, and a
//     group with offsets only on topics not mirrored is Pending/NoSourceOffsets;
//   - once the engine checkpoints, the group is Checkpointed with both partitions and a
//     recent checkpoint time, its target offsets never pass its source offsets and
//     reach them (nothing filtered: the translation becomes exact), and the time is
//     renewed while nothing moves;
//   - a group with an active member on the target is Skipped/TargetGroupActive and left
//     untouched; once the member leaves it is checkpointed.
func TestGroupCheckpointStatus(t *testing.T) {
	requireEnv(t)
	t.Parallel()
	const (
		ns, name          = "t-groups", "failover"
		topic, other      = "grpst.a", "grpst-unmirrored"
		app, live, idle   = "grpst-app", "grpst-live", "grpst-idle"
		partitions        = 2
		perPartition      = 20
		groupSyncInterval = time.Second
	)
	admin := kafkaAdmin(t, env.source)
	createTopic(t, admin, topic, partitions)
	createTopic(t, admin, other, 1)
	src := newKgoClient(t, env.source, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := int32(0); p < partitions; p++ {
		for i := 0; i < perPartition; i++ {
			if err := src.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Partition: p, Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := src.ProduceSync(context.Background(), &kgo.Record{Topic: other, Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	appOffsets := map[int32]int64{0: 10, 1: 7}
	liveOffsets := map[int32]int64{0: 5, 1: 15}
	testutil.CommitOffsets(t, env.source.ListenAddrs(), app, topic, appOffsets, "")
	testutil.CommitOffsets(t, env.source.ListenAddrs(), live, topic, liveOffsets, "")
	testutil.CommitOffsets(t, env.source.ListenAddrs(), idle, other, map[int32]int64{0: 1}, "")

	create(t, testMirror(ns, name, `grpst\.a`, func(m *v1alpha1.KafkaMirror) {
		m.Spec.TopicSyncInterval = &metav1.Duration{Duration: time.Second}
		m.Spec.Groups = &v1alpha1.GroupsSpec{Include: []string{"grpst-.*"}, SyncInterval: &metav1.Duration{Duration: groupSyncInterval}}
	}))
	// The topic sync creates the target topic; nothing has written offset syncs yet.
	waitGroups(t, ns, name, func(gs *v1alpha1.GroupsStatus) error {
		return expectGroups(gs, 3, map[string]groupWant{
			app:  {state: v1alpha1.GroupStatePending, reason: v1alpha1.GroupReasonNoOffsetSyncs},
			live: {state: v1alpha1.GroupStatePending, reason: v1alpha1.GroupReasonNoOffsetSyncs},
			idle: {state: v1alpha1.GroupStatePending, reason: v1alpha1.GroupReasonNoSourceOffsets},
		})
	})

	// A consumer of grpst-live reads the target before the mirror starts.
	member := newKgoClient(t, env.target, kgo.ConsumerGroup(live), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(100*time.Millisecond))
	memberDone := make(chan struct{})
	go func() {
		defer close(memberDone)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			fs := member.PollFetches(ctx)
			cancel()
			if fs.IsClientClosed() {
				return
			}
		}
	}()
	targetAdmin := kafkaAdmin(t, env.target)
	testutil.WaitFor(t, 30*time.Second, "the target member to join", func() bool { return targetGroupMembers(t, targetAdmin, live) == 1 })

	m := &v1alpha1.KafkaMirror{}
	if err := get(m, ns, name); err != nil {
		t.Fatal(err)
	}
	cfg, err := validate(m)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Metrics.Address = "0"
	engine, err := mirror.New(cfg, mirror.WithRegisterer(prometheus.NewRegistry()), mirror.WithLogger(newTestLogger(&testutil.SyncBuffer{})))
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now().Truncate(time.Second)
	ctx, stop := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- engine.Run(ctx) }()
	defer func() {
		stop()
		if err := <-runErr; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("the engine failed: %v", err)
		}
	}()

	var firstCheckpoint time.Time
	waitGroups(t, ns, name, func(gs *v1alpha1.GroupsStatus) error {
		if err := expectGroups(gs, 3, map[string]groupWant{
			app:  {state: v1alpha1.GroupStateCheckpointed, reason: v1alpha1.GroupReasonCheckpointed, partitions: partitions},
			live: {state: v1alpha1.GroupStateSkipped, reason: v1alpha1.GroupReasonTargetGroupActive, members: 1},
			idle: {state: v1alpha1.GroupStatePending, reason: v1alpha1.GroupReasonNoSourceOffsets},
		}); err != nil {
			return err
		}
		g := groupItem(gs, app)
		if g.LastCheckpointTime == nil || g.LastCheckpointTime.Time.Before(started) || g.LastCheckpointTime.Time.After(time.Now()) {
			return fmt.Errorf("group %s: last checkpoint %v, want between the engine's start %v and now", app, g.LastCheckpointTime, started)
		}
		if gs.Checkpointed != 1 || gs.Skipped != 1 || gs.Pending != 1 {
			return fmt.Errorf("counts checkpointed %d, skipped %d, pending %d; want 1 each", gs.Checkpointed, gs.Skipped, gs.Pending)
		}
		firstCheckpoint = g.LastCheckpointTime.Time
		for metric, want := range map[prometheus.Gauge]float64{
			groupPartitionsTranslated.WithLabelValues(ns, name, app):  partitions,
			groupPartitionsTranslated.WithLabelValues(ns, name, live): 0,
			groupLastCheckpoint.WithLabelValues(ns, name, app):        float64(firstCheckpoint.Unix()),
			groupStateCounts.WithLabelValues(ns, name, "selected"):    3,
			groupStateCounts.WithLabelValues(ns, name, "skipped"):     1,
			groupActiveMembers.WithLabelValues(ns, name, app):         0,
			groupActiveMembers.WithLabelValues(ns, name, live):        1,
			// groups.syncInterval + topicSyncInterval, for the stale-checkpoint alert
			groupCheckpointInterval.WithLabelValues(ns, name): (groupSyncInterval + time.Second).Seconds(),
		} {
			if got := promtestutil.ToFloat64(metric); got != want {
				return fmt.Errorf("%s = %v, want %v", metric.Desc(), got, want)
			}
		}
		return nil
	})
	waitExactCheckpoint(t, app, topic, appOffsets)
	exactSeen := time.Now()
	if got := testutil.CommittedOffsets(t, env.target.ListenAddrs(), live, topic, partitions); got[0] != -1 || got[1] != -1 {
		t.Fatalf("the active target group %s was moved: it holds %v", live, got)
	}

	// Nothing moves, yet the checkpoint is renewed every groups.syncInterval; the
	// member leaves, and its group is checkpointed.
	member.Close()
	<-memberDone
	waitGroups(t, ns, name, func(gs *v1alpha1.GroupsStatus) error {
		if err := expectGroups(gs, 3, map[string]groupWant{
			app:  {state: v1alpha1.GroupStateCheckpointed, reason: v1alpha1.GroupReasonCheckpointed, partitions: partitions},
			live: {state: v1alpha1.GroupStateCheckpointed, reason: v1alpha1.GroupReasonCheckpointed, partitions: partitions},
			idle: {state: v1alpha1.GroupStatePending, reason: v1alpha1.GroupReasonNoSourceOffsets},
		}); err != nil {
			return err
		}
		// Whole seconds, rounded down: a time after exactSeen is a commit after it.
		if g := groupItem(gs, app); !g.LastCheckpointTime.Time.After(exactSeen) {
			return fmt.Errorf("group %s: last checkpoint %v, want it renewed after %v", app, g.LastCheckpointTime, exactSeen)
		}
		return nil
	})
	waitExactCheckpoint(t, live, topic, liveOffsets)
	waitExactCheckpoint(t, app, topic, appOffsets) // renewed, not moved
	if err := get(m, ns, name); err != nil {
		t.Fatal(err)
	}
	out := failoverDocStatus(t, m)
	if !strings.Contains(out, app+"\tCheckpointed\tCheckpointed\t2\t"+groupItem(m.Status.Groups, app).LastCheckpointTime.UTC().Format(time.RFC3339)+"\n") {
		t.Fatalf("docs/failover.md's kubectl command prints\n%s\nwant a line for %s, Checkpointed, 2 partitions and its time", out, app)
	}

	if err := env.client.Delete(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 90*time.Second, func() error {
		if n := promtestutil.CollectAndCount(groupStateCounts) + promtestutil.CollectAndCount(groupPartitionsTranslated); n != 0 {
			return fmt.Errorf("%d group series left for the deleted mirror", n)
		}
		return nil
	})
}

// failoverDocStatus evaluates the JSONPath of docs/failover.md's
// `kubectl get kafkamirror -o jsonpath=...` on m, as kubectl does.
func failoverDocStatus(t *testing.T, m *v1alpha1.KafkaMirror) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "docs", "failover.md"))
	if err != nil {
		t.Fatal(err)
	}
	const prefix = "$ kubectl get kafkamirror orders -o jsonpath='"
	var expr string
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, prefix); ok {
			expr = strings.TrimSuffix(rest, "'")
		}
	}
	if expr == "" {
		t.Fatalf("docs/failover.md has no line starting with %q", prefix)
	}
	// kubectl's --allow-missing-template-keys is true by default: an absent
	// lastCheckpointTime prints as nothing.
	jp := jsonpath.New("failover").AllowMissingKeys(true)
	if err := jp.Parse(expr); err != nil {
		t.Fatalf("docs/failover.md's JSONPath %q: %v", expr, err)
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(m)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := jp.Execute(&buf, obj); err != nil {
		t.Fatalf("docs/failover.md's JSONPath %q: %v", expr, err)
	}
	return buf.String()
}

// waitExactCheckpoint waits until the target group holds want, the source group's
// offsets: nothing is filtered, so once the mirror wrote a sync at the end of each
// partition the translation is exact. Before that, a checkpoint may translate to the
// safe side (the record after an earlier sync), never past want: no record is skipped.
func waitExactCheckpoint(t *testing.T, group, topic string, want map[int32]int64) {
	t.Helper()
	testutil.Eventually(t, 90*time.Second, func() error {
		got := testutil.CommittedOffsets(t, env.target.ListenAddrs(), group, topic, int32(len(want)))
		for p, w := range want {
			if got[p] > w {
				t.Fatalf("target group %s holds %v, past the source group's %v: records would be skipped", group, got, want)
			}
			if got[p] != w {
				return fmt.Errorf("target group %s holds %v, want the source group's %v", group, got, want)
			}
		}
		return nil
	})
}

// groupWant is what a test expects of one status.groups item.
type groupWant struct {
	state      v1alpha1.GroupCheckpointState
	reason     string
	partitions int32
	members    int32
}

func expectGroups(gs *v1alpha1.GroupsStatus, selected int32, want map[string]groupWant) error {
	if gs == nil {
		return errors.New("no status.groups yet")
	}
	if gs.Selected != selected || len(gs.Items) != len(want) {
		return fmt.Errorf("status.groups selects %d and lists %d groups, want %d: %+v", gs.Selected, len(gs.Items), len(want), gs.Items)
	}
	for g, w := range want {
		it := groupItem(gs, g)
		if it == nil {
			return fmt.Errorf("group %s not listed: %+v", g, gs.Items)
		}
		if it.State != w.state || it.Reason != w.reason || it.PartitionsTranslated != w.partitions || it.ActiveMembers != w.members {
			return fmt.Errorf("group %s: %s/%s, %d partitions, %d members (%s); want %s/%s, %d, %d",
				g, it.State, it.Reason, it.PartitionsTranslated, it.ActiveMembers, it.Message, w.state, w.reason, w.partitions, w.members)
		}
	}
	return nil
}

func groupItem(gs *v1alpha1.GroupsStatus, name string) *v1alpha1.GroupStatus {
	for i := range gs.Items {
		if gs.Items[i].Name == name {
			return &gs.Items[i]
		}
	}
	return nil
}

// waitGroups waits until the KafkaMirror's status.groups passes check.
func waitGroups(t *testing.T, ns, name string, check func(*v1alpha1.GroupsStatus) error) {
	t.Helper()
	testutil.Eventually(t, 90*time.Second, func() error {
		m := &v1alpha1.KafkaMirror{}
		if err := get(m, ns, name); err != nil {
			return err
		}
		return check(m.Status.Groups)
	})
}

func newKgoClient(t *testing.T, c *kfake.Cluster, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// targetGroupMembers is the number of members of group on the target cluster.
func targetGroupMembers(t *testing.T, admin sarama.ClusterAdmin, group string) int {
	t.Helper()
	d, err := admin.DescribeConsumerGroups([]string{group})
	if err != nil || len(d) != 1 {
		t.Fatalf("while describing group %s on the target: %v", group, err)
	}
	return len(d[0].Members)
}

// TestNextGroupsStatus: status.groups follows the latest read, is dropped with
// spec.groups, and keeps its last value when the groups could not be read.
func TestNextGroupsStatus(t *testing.T) {
	prev := &v1alpha1.GroupsStatus{Selected: 1, Checkpointed: 1}
	read := &v1alpha1.GroupsStatus{Selected: 2, Pending: 2}
	withGroups := &config.Config{Groups: &config.Groups{Include: []string{"app"}}}
	tests := map[string]struct {
		cfg  *config.Config
		res  topicSyncResult
		want *v1alpha1.GroupsStatus
	}{
		"read":                  {cfg: withGroups, res: topicSyncResult{groups: read}, want: read},
		"read failed":           {cfg: withGroups, res: topicSyncResult{groupsErr: errors.New("no answer")}, want: prev},
		"spec.groups removed":   {cfg: &config.Config{}, res: topicSyncResult{groups: read}, want: nil},
		"no config (not valid)": {cfg: nil, want: nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := nextGroupsStatus(prev, tc.cfg, tc.res); got != tc.want {
				t.Fatalf("nextGroupsStatus = %+v, want %+v", got, tc.want)
			}
		})
	}
	// A re-sync whose groups differ is a new outcome (the KafkaMirror is enqueued to
	// report it); the same groups are not.
	same := topicSyncResult{groups: &v1alpha1.GroupsStatus{Selected: 2, Pending: 2}}
	if !sameOutcome(topicSyncResult{groups: read}, same) || sameOutcome(topicSyncResult{groups: prev}, same) {
		t.Fatal("sameOutcome does not compare status.groups")
	}
}
