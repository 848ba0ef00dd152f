package topics

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"strings"
	"testing"

	"github.com/IBM/sarama"
	"github.com/go-logr/logr/funcr"
	"github.com/go-logr/logr/testr"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
)

// rejectCreates makes the cluster answer every CreateTopics for topic with a policy
// violation, as a broker with a create-topic policy would.
func rejectCreates(c *kfake.Cluster, topic string) {
	c.ControlKey(int16(kmsg.CreateTopics), func(req kmsg.Request) (kmsg.Response, error, bool) {
		creq := req.(*kmsg.CreateTopicsRequest)
		if len(creq.Topics) != 1 || creq.Topics[0].Topic != topic {
			return nil, nil, false
		}
		c.KeepControl()
		resp := creq.ResponseKind().(*kmsg.CreateTopicsResponse)
		rt := kmsg.NewCreateTopicsResponseTopic()
		rt.Topic = topic
		rt.ErrorCode = kerr.PolicyViolation.Code
		msg := "topic names with 'bad' are not allowed"
		rt.ErrorMessage = &msg
		resp.Topics = append(resp.Topics, rt)
		return resp, nil, true
	})
}

// stateKey is the comparable part of a TopicState.
type stateKey struct {
	Source, Target                     string
	SourcePartitions, TargetPartitions int32
	Action                             string
}

func keys(rep Report) []stateKey {
	out := make([]stateKey, 0, len(rep.Topics))
	for _, s := range rep.Topics {
		out = append(out, stateKey{s.Source, s.Target, s.SourcePartitions, s.TargetPartitions, s.Action})
	}
	return out
}

type counts struct{ Selected, InSync, Created, Expanded, Mismatched, Failed int }

func countsOf(r Report) counts {
	return counts{r.Selected, r.InSync, r.Created, r.Expanded, r.Mismatched, r.Failed}
}

// userTopics drops Kafka's internal topics from a partition-count map.
func userTopics(m map[string]int32) map[string]int32 {
	out := map[string]int32{}
	for k, v := range m {
		if !strings.HasPrefix(k, "__") {
			out[k] = v
		}
	}
	return out
}

func TestSync(t *testing.T) {
	all := config.Topics{Include: []string{".*"}}
	tests := map[string]struct {
		source, target map[string]int32
		topics         config.Topics
		rejectCreate   string
		want           []stateKey
		wantCounts     counts
		wantErr        map[string]string // source topic -> text in its Err
		wantTarget     map[string]int32
	}{
		"missing topic created with the source partition count": {
			source:     map[string]int32{"orders": 3},
			topics:     all,
			want:       []stateKey{{"orders", "orders", 3, 3, ActionCreated}},
			wantCounts: counts{Selected: 1, Created: 1},
			wantTarget: map[string]int32{"orders": 3},
		},
		"target with fewer partitions expanded": {
			source:     map[string]int32{"orders": 5},
			target:     map[string]int32{"orders": 2},
			topics:     all,
			want:       []stateKey{{"orders", "orders", 5, 5, ActionExpanded}},
			wantCounts: counts{Selected: 1, Expanded: 1},
			wantTarget: map[string]int32{"orders": 5},
		},
		"target with more partitions reported and left alone": {
			source:     map[string]int32{"orders": 2},
			target:     map[string]int32{"orders": 4},
			topics:     all,
			want:       []stateKey{{"orders", "orders", 2, 4, ActionTargetHasMore}},
			wantCounts: counts{Selected: 1, Mismatched: 1},
			wantTarget: map[string]int32{"orders": 4},
		},
		"equal counts are in sync": {
			source:     map[string]int32{"orders": 3},
			target:     map[string]int32{"orders": 3},
			topics:     all,
			want:       []stateKey{{"orders", "orders", 3, 3, ActionNone}},
			wantCounts: counts{Selected: 1, InSync: 1},
			wantTarget: map[string]int32{"orders": 3},
		},
		"excluded, unmatched and internal-looking topics ignored": {
			source:     map[string]int32{"orders.eu": 2, "orders.tmp.1": 1, "audit": 1, "__private": 1},
			topics:     config.Topics{Include: []string{"orders\\..*", "__private"}, Exclude: []string{"orders\\.tmp\\..*"}},
			want:       []stateKey{{"orders.eu", "orders.eu", 2, 2, ActionCreated}},
			wantCounts: counts{Selected: 1, Created: 1},
			wantTarget: map[string]int32{"orders.eu": 2},
		},
		"rename prefix": {
			source:     map[string]int32{"orders": 2},
			target:     map[string]int32{"orders": 7},
			topics:     config.Topics{Include: []string{".*"}, Rename: &config.Rename{Prefix: "dc1."}},
			want:       []stateKey{{"orders", "dc1.orders", 2, 2, ActionCreated}},
			wantCounts: counts{Selected: 1, Created: 1},
			wantTarget: map[string]int32{"orders": 7, "dc1.orders": 2},
		},
		"rename template": {
			source:     map[string]int32{"orders": 2, "payments": 1},
			target:     map[string]int32{"dc1.payments.mirror": 1},
			topics:     config.Topics{Include: []string{".*"}, Rename: &config.Rename{Template: "dc1.{topic}.mirror"}},
			want:       []stateKey{{"orders", "dc1.orders.mirror", 2, 2, ActionCreated}, {"payments", "dc1.payments.mirror", 1, 1, ActionNone}},
			wantCounts: counts{Selected: 2, InSync: 1, Created: 1},
			wantTarget: map[string]int32{"dc1.orders.mirror": 2, "dc1.payments.mirror": 1},
		},
		"one rejected create does not stop the others": {
			source:       map[string]int32{"a": 1, "bad": 2, "c": 3, "d": 4},
			target:       map[string]int32{"c": 1, "d": 6},
			topics:       all,
			rejectCreate: "bad",
			want: []stateKey{
				{"a", "a", 1, 1, ActionCreated},
				{"bad", "bad", 2, 0, ActionFailed},
				{"c", "c", 3, 3, ActionExpanded},
				{"d", "d", 4, 6, ActionTargetHasMore},
			},
			wantCounts: counts{Selected: 4, Created: 1, Expanded: 1, Mismatched: 1, Failed: 1},
			wantErr:    map[string]string{"bad": `while creating target topic "bad" with 2 partitions and replication factor 1: `},
			wantTarget: map[string]int32{"a": 1, "c": 3, "d": 6},
		},
		"nothing selected": {
			source:     map[string]int32{"a": 1},
			topics:     config.Topics{Include: []string{"b"}},
			want:       []stateKey{},
			wantCounts: counts{},
			wantTarget: map[string]int32{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			srcCluster, tgtCluster := newCluster(t), newCluster(t)
			src, tgt := newAdmin(t, srcCluster), newAdmin(t, tgtCluster)
			for n, p := range tc.source {
				createTopic(t, src, n, p, nil)
			}
			for n, p := range tc.target {
				createTopic(t, tgt, n, p, nil)
			}
			if tc.rejectCreate != "" {
				rejectCreates(tgtCluster, tc.rejectCreate)
			}
			sel, err := NewSelector(tc.topics)
			if err != nil {
				t.Fatalf("NewSelector: %v", err)
			}
			s := NewSyncer(src, tgt, sel, SyncOptions{Logger: testr.New(t)})

			rep, err := s.Sync(context.Background())
			if err != nil {
				t.Fatalf("Sync: %v", err)
			}
			if got := keys(rep); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("states:\n got %+v\nwant %+v", got, tc.want)
			}
			if got := countsOf(rep); got != tc.wantCounts {
				t.Errorf("counts = %+v, want %+v", got, tc.wantCounts)
			}
			for _, st := range rep.Topics {
				want, failed := tc.wantErr[st.Source]
				switch {
				case failed && (st.Err == nil || !strings.Contains(st.Err.Error(), want)):
					t.Errorf("%s: Err = %v, want it to contain %q", st.Source, st.Err, want)
				case !failed && st.Err != nil:
					t.Errorf("%s: unexpected Err %v", st.Source, st.Err)
				}
			}
			if got := userTopics(partitionCounts(t, tgt)); !maps.Equal(got, tc.wantTarget) {
				t.Errorf("target topics = %v, want %v", got, tc.wantTarget)
			}

			// A second sync with nothing changed changes nothing.
			again, err := s.Sync(context.Background())
			if err != nil {
				t.Fatalf("second Sync: %v", err)
			}
			for _, st := range again.Topics {
				want := ActionNone
				if st.SourcePartitions < st.TargetPartitions {
					want = ActionTargetHasMore
				}
				if _, failed := tc.wantErr[st.Source]; failed {
					want = ActionFailed
				}
				if st.Action != want {
					t.Errorf("second Sync: %s action = %s, want %s", st.Source, st.Action, want)
				}
			}
			if again.Created != 0 || again.Expanded != 0 {
				t.Errorf("second Sync created %d and expanded %d topics, want none", again.Created, again.Expanded)
			}
			if got := userTopics(partitionCounts(t, tgt)); !maps.Equal(got, tc.wantTarget) {
				t.Errorf("target topics after second Sync = %v, want %v", got, tc.wantTarget)
			}
		})
	}
}

func TestSyncFollowsSourceChanges(t *testing.T) {
	src, tgt := newAdmin(t, newCluster(t)), newAdmin(t, newCluster(t))
	createTopic(t, src, "orders", 2, nil)
	sel, err := NewSelector(config.Topics{Include: []string{"orders.*"}})
	if err != nil {
		t.Fatal(err)
	}
	var logged []string
	log := funcr.New(func(prefix, args string) { logged = append(logged, args) }, funcr.Options{})
	s := NewSyncer(src, tgt, sel, SyncOptions{Logger: log})
	ctx := context.Background()

	steps := []struct {
		name   string
		change func()
		want   []stateKey
	}{
		{"first sync creates", func() {}, []stateKey{{"orders", "orders", 2, 2, ActionCreated}}},
		{"source expanded", func() {
			if err := src.CreatePartitions("orders", 5, nil, false); err != nil {
				t.Fatalf("expanding source: %v", err)
			}
		}, []stateKey{{"orders", "orders", 5, 5, ActionExpanded}}},
		{"new matching source topic", func() {
			createTopic(t, src, "orders.new", 3, nil)
			createTopic(t, src, "other", 3, nil)
		}, []stateKey{{"orders", "orders", 5, 5, ActionNone}, {"orders.new", "orders.new", 3, 3, ActionCreated}}},
		{"nothing changed", func() {}, []stateKey{{"orders", "orders", 5, 5, ActionNone}, {"orders.new", "orders.new", 3, 3, ActionNone}}},
	}
	for _, step := range steps {
		step.change()
		rep, err := s.Sync(ctx)
		if err != nil {
			t.Fatalf("%s: Sync: %v", step.name, err)
		}
		if got := keys(rep); !reflect.DeepEqual(got, step.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", step.name, got, step.want)
		}
	}
	want := map[string]int32{"orders": 5, "orders.new": 3}
	if got := userTopics(partitionCounts(t, tgt)); !maps.Equal(got, want) {
		t.Errorf("target topics = %v, want %v", got, want)
	}
	// One line per change, none for syncs that changed nothing.
	wantLogged := []string{
		`"level"=0 "msg"="Created target topic" "topic"="orders" "targetTopic"="orders" "partitions"=2 "replicationFactor"=1`,
		`"level"=0 "msg"="Expanded target topic" "topic"="orders" "targetTopic"="orders" "from"=2 "to"=5`,
		`"level"=0 "msg"="Created target topic" "topic"="orders.new" "targetTopic"="orders.new" "partitions"=3 "replicationFactor"=1`,
	}
	if !reflect.DeepEqual(logged, wantLogged) {
		t.Errorf("log lines:\n got %q\nwant %q", logged, wantLogged)
	}
}

func TestSyncConfigUpdateRejected(t *testing.T) {
	src, tgtCluster := newAdmin(t, newCluster(t)), newCluster(t)
	tgt := newAdmin(t, tgtCluster)
	for _, n := range []string{"a", "b"} {
		createTopic(t, src, n, 1, map[string]string{"retention.ms": "1000"})
		createTopic(t, tgt, n, 1, nil)
	}
	// The target refuses config changes on topic a only.
	tgtCluster.ControlKey(int16(kmsg.IncrementalAlterConfigs), func(req kmsg.Request) (kmsg.Response, error, bool) {
		areq := req.(*kmsg.IncrementalAlterConfigsRequest)
		if len(areq.Resources) != 1 || areq.Resources[0].ResourceName != "a" {
			return nil, nil, false
		}
		tgtCluster.KeepControl()
		resp := areq.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
		rr := kmsg.NewIncrementalAlterConfigsResponseResource()
		rr.ResourceName, rr.ResourceType = "a", kmsg.ConfigResourceTypeTopic
		rr.ErrorCode = kerr.TopicAuthorizationFailed.Code
		resp.Resources = append(resp.Resources, rr)
		return resp, nil, true
	})
	sel, _ := NewSelector(config.Topics{Include: []string{".*"}})
	rep, err := NewSyncer(src, tgt, sel, SyncOptions{SyncConfigs: true}).Sync(context.Background())
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	// Configs are second to partitions: the topic is in sync, its configs are not.
	want := []stateKey{{"a", "a", 1, 1, ActionNone}, {"b", "b", 1, 1, ActionNone}}
	if got := keys(rep); !reflect.DeepEqual(got, want) {
		t.Fatalf("states:\n got %+v\nwant %+v", got, want)
	}
	if err := rep.Topics[0].ConfigErr; err == nil || !strings.Contains(err.Error(), `while updating configs [retention.ms] of target topic "a"`) ||
		!errors.Is(err, sarama.ErrTopicAuthorizationFailed) {
		t.Errorf("a: ConfigErr = %v, want it to name the configs and the topic and wrap the authorization error", err)
	}
	if rep.Failed != 0 || rep.ConfigsFailed != 1 || rep.Topics[1].ConfigErr != nil {
		t.Errorf("Failed = %d, ConfigsFailed = %d, b ConfigErr = %v; want 0, 1, nil", rep.Failed, rep.ConfigsFailed, rep.Topics[1].ConfigErr)
	}
	if got := topicConfig(t, tgt, "b", "retention.ms"); got != "1000" {
		t.Errorf("target b retention.ms = %q, want 1000", got)
	}
}

func TestSyncDryRunChangesNothing(t *testing.T) {
	src, tgt := newAdmin(t, newCluster(t)), newAdmin(t, newCluster(t))
	createTopic(t, src, "a", 2, map[string]string{"retention.ms": "3600000"})
	createTopic(t, src, "b", 4, map[string]string{"retention.ms": "7200000"})
	createTopic(t, src, "c", 1, nil)
	createTopic(t, tgt, "b", 2, nil)
	createTopic(t, tgt, "c", 3, nil)
	sel, _ := NewSelector(config.Topics{Include: []string{".*"}})
	s := NewSyncer(src, tgt, sel, SyncOptions{DryRun: true, SyncConfigs: true, Logger: testr.New(t)})

	for i := range 2 {
		rep, err := s.Sync(context.Background())
		if err != nil {
			t.Fatalf("Sync: %v", err)
		}
		want := []stateKey{
			{"a", "a", 2, 0, ActionCreated},
			{"b", "b", 4, 2, ActionExpanded},
			{"c", "c", 1, 3, ActionTargetHasMore},
		}
		if got := keys(rep); !reflect.DeepEqual(got, want) {
			t.Errorf("dry run %d:\n got %+v\nwant %+v", i, got, want)
		}
		if got := rep.Topics[1].UpdatedConfigs; !reflect.DeepEqual(got, []string{"retention.ms"}) {
			t.Errorf("dry run %d: b UpdatedConfigs = %q, want [retention.ms]", i, got)
		}
	}
	want := map[string]int32{"b": 2, "c": 3}
	if got := userTopics(partitionCounts(t, tgt)); !maps.Equal(got, want) {
		t.Errorf("target topics after dry run = %v, want %v", got, want)
	}
	if got := topicConfig(t, tgt, "b", "retention.ms"); got != "604800000" {
		t.Errorf("target b retention.ms = %s after dry run, want the default 604800000", got)
	}
}

func TestSyncConfigs(t *testing.T) {
	src, tgt := newAdmin(t, newCluster(t)), newAdmin(t, newCluster(t))
	createTopic(t, src, "compacted", 2, map[string]string{
		"cleanup.policy":         "compact",
		"retention.ms":           "3600000",
		"max.message.bytes":      "2097152",
		"min.insync.replicas":    "2",             // replication: never copied
		"message.timestamp.type": "LogAppendTime", // would rewrite mirrored timestamps
	})
	createTopic(t, src, "existing", 1, map[string]string{"retention.ms": "60000", "segment.bytes": "1048576"})
	createTopic(t, tgt, "existing", 1, map[string]string{"retention.ms": "1", "delete.retention.ms": "5"})
	sel, _ := NewSelector(config.Topics{Include: []string{".*"}})
	s := NewSyncer(src, tgt, sel, SyncOptions{SyncConfigs: true, Logger: testr.New(t)})

	rep, err := s.Sync(context.Background())
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	wantStates := []stateKey{{"compacted", "compacted", 2, 2, ActionCreated}, {"existing", "existing", 1, 1, ActionNone}}
	if got := keys(rep); !reflect.DeepEqual(got, wantStates) {
		t.Fatalf("states:\n got %+v\nwant %+v", got, wantStates)
	}
	if got := rep.Topics[1].UpdatedConfigs; !reflect.DeepEqual(got, []string{"retention.ms", "segment.bytes"}) {
		t.Errorf("existing UpdatedConfigs = %q, want [retention.ms segment.bytes]", got)
	}
	if rep.ConfigsUpdated != 1 {
		t.Errorf("ConfigsUpdated = %d, want 1", rep.ConfigsUpdated)
	}

	wantConfigs := []struct{ topic, name, value string }{
		{"compacted", "cleanup.policy", "compact"},
		{"compacted", "retention.ms", "3600000"},
		{"compacted", "max.message.bytes", "2097152"},
		{"compacted", "min.insync.replicas", "1"},             // target default kept
		{"compacted", "message.timestamp.type", "CreateTime"}, // target default kept
		{"existing", "retention.ms", "60000"},
		{"existing", "segment.bytes", "1048576"},
		{"existing", "delete.retention.ms", "5"}, // set only on the target: left alone
	}
	for _, w := range wantConfigs {
		if got := topicConfig(t, tgt, w.topic, w.name); got != w.value {
			t.Errorf("target %s %s = %q, want %q", w.topic, w.name, got, w.value)
		}
	}

	// A config change on the source is followed; then nothing more happens.
	if err := src.IncrementalAlterConfig(sarama.TopicResource, "compacted", map[string]sarama.IncrementalAlterConfigsEntry{
		"retention.ms": {Operation: sarama.IncrementalAlterConfigsOperationSet, Value: ptr("7200000")},
	}, false); err != nil {
		t.Fatalf("altering source config: %v", err)
	}
	for i, want := range [][]string{{"retention.ms"}, nil} {
		rep, err := s.Sync(context.Background())
		if err != nil {
			t.Fatalf("Sync %d: %v", i, err)
		}
		if got := rep.Topics[0].UpdatedConfigs; !reflect.DeepEqual(got, want) {
			t.Errorf("Sync %d: compacted UpdatedConfigs = %q, want %q", i, got, want)
		}
		if got := rep.Topics[1].UpdatedConfigs; got != nil {
			t.Errorf("Sync %d: existing UpdatedConfigs = %q, want none", i, got)
		}
	}
	if got := topicConfig(t, tgt, "compacted", "retention.ms"); got != "7200000" {
		t.Errorf("target compacted retention.ms = %q, want 7200000", got)
	}
}

func ptr(s string) *string { return &s }

func TestSyncUnreachable(t *testing.T) {
	tests := map[string]struct {
		closeSource bool
		want        string
		wantRole    string
	}{
		"source down": {closeSource: true, want: "while listing source topics", wantRole: kafka.RoleSource},
		"target down": {closeSource: false, want: "while listing target topics", wantRole: kafka.RoleTarget},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			srcCluster, tgtCluster := newCluster(t), newCluster(t)
			src, tgt := newAdmin(t, srcCluster), newAdmin(t, tgtCluster)
			createTopic(t, src, "orders", 1, nil)
			if tc.closeSource {
				srcCluster.Close()
			} else {
				tgtCluster.Close()
			}
			sel, _ := NewSelector(config.Topics{Include: []string{".*"}})
			rep, err := NewSyncer(src, tgt, sel, SyncOptions{}).Sync(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Sync error = %v, want one containing %q", err, tc.want)
			}
			var ce *ClusterError
			if !errors.As(err, &ce) || ce.Role != tc.wantRole {
				t.Fatalf("Sync error = %#v, want a *ClusterError with Role %q", err, tc.wantRole)
			}
			if errors.Unwrap(ce) == nil {
				t.Error("ClusterError.Unwrap = nil, want the listing error")
			}
			if rep.Selected != 0 || len(rep.Topics) != 0 {
				t.Errorf("report = %+v, want empty", rep)
			}
		})
	}
}

// racingAdmin is a real admin whose create and expand calls are preceded by another
// client doing the same to the same topic, as when two syncers run at once.
type racingAdmin struct {
	sarama.ClusterAdmin
	other sarama.ClusterAdmin
	extra int32 // partitions the other client adds beyond the requested count
}

func (r racingAdmin) CreateTopic(topic string, d *sarama.TopicDetail, validateOnly bool) error {
	if err := r.other.CreateTopic(topic, d, false); err != nil {
		return err
	}
	return r.ClusterAdmin.CreateTopic(topic, d, validateOnly)
}

func (r racingAdmin) CreatePartitions(topic string, count int32, a [][]int32, validateOnly bool) error {
	if err := r.other.CreatePartitions(topic, count+r.extra, a, false); err != nil {
		return err
	}
	return r.ClusterAdmin.CreatePartitions(topic, count, a, validateOnly)
}

func TestSyncLosesRaceGracefully(t *testing.T) {
	src := newAdmin(t, newCluster(t))
	tgtCluster := newCluster(t)
	tgt, other := newAdmin(t, tgtCluster), newAdmin(t, tgtCluster)
	createTopic(t, src, "new", 3, nil)
	createTopic(t, src, "grown", 4, nil)
	createTopic(t, tgt, "grown", 1, nil)
	sel, _ := NewSelector(config.Topics{Include: []string{".*"}})

	rep, err := NewSyncer(src, racingAdmin{tgt, other, 2}, sel, SyncOptions{}).Sync(context.Background())
	if err != nil {
		t.Fatalf("Sync: %v", err)
	}
	want := []stateKey{
		{"grown", "grown", 4, 6, ActionTargetHasMore}, // the other client went further
		{"new", "new", 3, 3, ActionNone},              // the other client created it first
	}
	if got := keys(rep); !reflect.DeepEqual(got, want) {
		t.Errorf("states:\n got %+v\nwant %+v", got, want)
	}
	if rep.Failed != 0 {
		t.Errorf("Failed = %d, want 0: %+v", rep.Failed, rep.Topics)
	}
}
