//go:build kafka

package e2ekafka

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/audit"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/realkafka"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// appGroupPrefix starts the names of the application groups the mirror translates
// (groups.include app\..*), so that prefixed ACLs grant exactly those.
const appGroupPrefix = "app."

// groupACLs is what docs/security.md adds to mirrorACLs for `groups` (offset translation)
// when the translated groups' names start with appGroupPrefix: the offset syncs on the
// target, the groups' offsets read on the source and committed on the target.
func groupACLs(group string) []aclRule {
	syncs := mirror.OffsetSyncTopic(group)
	topic, grp := kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeGroup
	rule := func(cluster, user string, res kmsg.ACLResourceType, name string, prefixed bool, op kadm.ACLOperation) aclRule {
		return aclRule{cluster: cluster, acl: realkafka.ACL{Principal: "User:" + user, Resource: res, Name: name, Prefixed: prefixed, Operation: op}}
	}
	return []aclRule{
		// Listing the groups (only those it may Describe are returned) and reading
		// their committed offsets.
		rule("source", sourceUser, grp, appGroupPrefix, true, kadm.OpDescribe),
		// The compacted sync topic: created at start, written on every ack, read back
		// to translate.
		rule("target", targetUser, topic, syncs, false, kadm.OpCreate),
		rule("target", targetUser, topic, syncs, false, kadm.OpWrite),
		rule("target", targetUser, topic, syncs, false, kadm.OpRead),
		// Checking at a restart that the existing sync topic is compacted.
		rule("target", targetUser, topic, syncs, false, kadm.OpDescribeConfigs),
		// Committing the translated offsets (and seeing whether the group has active
		// members there, which Read implies).
		rule("target", targetUser, grp, appGroupPrefix, true, kadm.OpRead),
	}
}

// TestSmokeSCRAMACLsGroups: as TestSmokeSCRAMACLs, with `groups` on. Both clusters allow
// nothing but the documented set with the groups' rows: an application group that
// committed on the source gets the same offsets on the target (the target topics are
// created empty by topic sync, so a translation that is exact is the identity), and the
// engine logs no authorization problem.
func TestSmokeSCRAMACLsGroups(t *testing.T) {
	s := newScenario(t, world{secure: true, noTargetTopics: true}, smokeTopics())
	rules := append(mirrorACLs(s.group, false), groupACLs(s.group)...)
	s.grant(rules...)
	cfg := s.config(func(c *config.Config) {
		s.secure(c)
		c.SyncTopics = config.BoolPtr(true)
		c.Groups = &config.Groups{Include: []string{`app\..*`}, SyncInterval: config.Duration{Duration: time.Second}}
	})
	p := s.produce(s.workload(8000, 0, 0)).Wait(t)

	// The application read part of every partition on the source and committed there.
	app := appGroupPrefix + "orders-reader"
	want := kadm.Offsets{}
	for topic, n := range s.topics {
		for part := int32(0); part < n; part++ {
			want.Add(kadm.Offset{Topic: topic, Partition: part, At: int64(100 + 10*part), LeaderEpoch: -1})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	if err := commitOffsets(ctx, s.src, app, want); err != nil {
		t.Fatalf("committing the application group on the source: %v", err)
	}

	e := s.startJoined("engine", cfg)
	rep := s.waitComplete(p, audit.Options{})
	got := s.waitGroupOffsets(app, want, 2*time.Minute)
	e.StopCleanly(time.Minute)
	s.assertAudit(rep, 0)

	// A restart finds the sync topic there (its configs are checked) and goes on
	// translating: the application read further meanwhile.
	for topic, n := range s.topics {
		for part := int32(0); part < n; part++ {
			want.Add(kadm.Offset{Topic: topic, Partition: part, At: int64(500 + 10*part), LeaderEpoch: -1})
		}
	}
	if err := commitOffsets(ctx, s.src, app, want); err != nil {
		t.Fatalf("committing the application group on the source: %v", err)
	}
	again := s.startJoined("engine-again", cfg)
	s.waitGroupOffsets(app, want, 2*time.Minute)
	again.StopCleanly(time.Minute)
	for _, eng := range []*engine{e, again} {
		if line := firstMatch(eng.LogPath(), []string{"authoriz|permission"}); line != "" {
			t.Errorf("with the documented ACLs engine %s still logged an authorization problem: %.400s", eng.Name, line)
		}
	}
	s.figures(rep, map[string]any{"auth": "SASL_SSL SCRAM-SHA-512", "acls": len(rules), "groupPartitions": len(got)})
}

// TestGroupACLEachRemoved: on secure clusters holding the documented set with the
// groups' rows, each of those rows is taken away in turn while an application group
// waits to be translated. The engine must still mirror every record (only translation
// degrades), name what is missing in a warning or error, not commit the group on the
// target, and translate it once the ACL is back and the engine restarted (as its pod
// would be after a change of the cluster's ACLs, or at its next start).
func TestGroupACLEachRemoved(t *testing.T) {
	s := newScenario(t, world{secure: true, noTargetTopics: true}, map[string]int32{})
	s.grant(mirrorACLs(s.group, false)...)
	rules := groupACLs(s.group)
	s.grant(rules...)
	// The groups by name: a name the source hides is then asked for, and named.
	var apps []string
	for i := range rules {
		apps = append(apps, fmt.Sprintf("%sreader%02d", appGroupPrefix, i))
	}
	cfg := s.config(func(c *config.Config) {
		s.secure(c)
		c.SyncTopics = config.BoolPtr(true)
		c.Groups = &config.Groups{Include: apps, SyncInterval: config.Duration{Duration: time.Second}}
	})
	for i, r := range rules {
		t.Run(r.String(), func(t *testing.T) {
			ss := *s
			ss.t, ss.start = t, time.Now()
			topic := fmt.Sprintf("e2e.groupacl%02d", i)
			ss.topics = map[string]int32{topic: 2}
			createTopics(t, ss.src, ss.topics, 1, nil)
			p := ss.produce(ss.workload(1000, 0, 0)).Wait(t)
			app := apps[i]
			want := kadm.Offsets{}
			want.Add(kadm.Offset{Topic: topic, Partition: 0, At: 300, LeaderEpoch: -1})
			want.Add(kadm.Offset{Topic: topic, Partition: 1, At: 400, LeaderEpoch: -1})
			ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
			defer cancel()
			if err := commitOffsets(ctx, ss.src, app, want); err != nil {
				t.Fatalf("committing the application group on the source: %v", err)
			}
			ss.revoke(r)
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				_ = ss.cluster(r.cluster).Grant(ctx, r.acl)
			})
			e := ss.startEngine(fmt.Sprintf("engine-%02d", i), cfg)
			rep := ss.waitComplete(p, audit.Options{})
			var line string
			deadline := time.Now().Add(aclReportTimeout)
			for line == "" && time.Now().Before(deadline) {
				line = firstMatch(e.LogPath(), []string{"authoriz|permission"})
				time.Sleep(500 * time.Millisecond)
			}
			if line == "" {
				t.Errorf("without %s the engine logged no warning or error about authorization within %v; its log ends:\n%s", r, aclReportTimeout, e.LogTail(15))
			}
			if committed := ss.groupOffsetsOnTarget(app, want); committed > 0 {
				t.Errorf("without %s the engine still committed %d partitions of %s on the target: the documented set holds an ACL translation does not need", r, committed, app)
			}
			t.Logf("without %s: %.300s", r, line)
			e.StopCleanly(time.Minute)
			ss.assertAudit(rep, 0)

			// With the ACL back, the restarted engine translates what it mirrors from
			// then on (the records mirrored while syncs could not be written have
			// none: an offset among them is not translated).
			ss.grant(r)
			after := ss.startEngine(fmt.Sprintf("engine-%02d-after", i), cfg)
			more := ss.produce(ss.workload(1000, 0, 0)).Wait(t)
			ss.waitComplete(more, audit.Options{})
			ctx, cancel = context.WithTimeout(context.Background(), adminTimeout)
			defer cancel()
			ends, err := ss.src.Admin().ListEndOffsets(ctx, topic)
			if err != nil {
				t.Fatal(err)
			}
			want = kadm.Offsets{}
			ends.Each(func(o kadm.ListedOffset) {
				want.Add(kadm.Offset{Topic: topic, Partition: o.Partition, At: o.Offset - 100, LeaderEpoch: -1})
			})
			if err := commitOffsets(ctx, ss.src, app, want); err != nil {
				t.Fatalf("committing the application group on the source: %v", err)
			}
			ss.waitGroupOffsets(app, want, 2*time.Minute)
			after.StopCleanly(time.Minute)
		})
	}
}

// groupOffsetsOnTarget counts the partitions of want that group has an offset for on
// the target.
func (s *scenario) groupOffsetsOnTarget(group string, want kadm.Offsets) int {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
	defer cancel()
	resp, err := s.dst.Admin().FetchOffsets(ctx, group)
	if err != nil {
		return 0
	}
	n := 0
	want.Each(func(o kadm.Offset) {
		if r, ok := resp.Lookup(o.Topic, o.Partition); ok && r.Err == nil && r.At >= 0 {
			n++
		}
	})
	return n
}

// waitGroupOffsets waits until group's committed offsets on the target equal want for
// every partition of want and returns them; it fails the test with the difference when
// they do not within timeout.
func (s *scenario) waitGroupOffsets(group string, want kadm.Offsets, timeout time.Duration) map[string]int64 {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	var diff []string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
		resp, err := s.dst.Admin().FetchOffsets(ctx, group)
		cancel()
		diff = diff[:0]
		got := map[string]int64{}
		want.Each(func(o kadm.Offset) {
			r, ok := resp.Lookup(o.Topic, o.Partition)
			at := int64(-1)
			if ok && r.Err == nil {
				at = r.At
			}
			got[fmt.Sprintf("%s/%d", o.Topic, o.Partition)] = at
			if at != o.At {
				diff = append(diff, fmt.Sprintf("%s/%d: %d, want %d", o.Topic, o.Partition, at, o.At))
			}
		})
		if err == nil && len(diff) == 0 {
			return got
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("group %s on the target did not reach the translated offsets within %v (fetch error %v): %v", group, timeout, err, diff)
		}
		time.Sleep(time.Second)
	}
}

// commitOffsets commits offs for group on c, as an application's consumer would.
// The request is kept at OffsetCommit v9 (Kafka 3.9's): v10 names topics by ID,
// which kadm does not fill in.
func commitOffsets(ctx context.Context, c *realkafka.Cluster, group string, offs kadm.Offsets) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Addrs()...), kgo.MaxVersions(kversion.V3_9_0()))
	if err != nil {
		return err
	}
	defer cl.Close()
	return kadm.NewClient(cl).CommitAllOffsets(ctx, group, offs)
}
