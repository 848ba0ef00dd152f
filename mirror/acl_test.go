package mirror

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// The users of aclSource: a superuser that writes the workload and grants ACLs, and the
// mirror's principal, subject to ACLs.
const (
	aclAdmin, aclAdminPassword   = "admin", "admin-Password"
	aclMirror, aclMirrorPassword = "mirror", "mirror-Password"
)

// aclSource starts a kfake source that authenticates with SCRAM-SHA-512 and authorizes
// with ACLs, holding testTopic with partitions; the mirror's user is granted acls only.
func aclSource(t *testing.T, partitions int32, acls ...kfake.ACL) *kfake.Cluster {
	t.Helper()
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser(config.SASLSCRAMSHA512, aclAdmin, aclAdminPassword),
		kfake.User(config.SASLSCRAMSHA512, aclMirror, aclMirrorPassword, acls...),
		kfake.SeedTopics(partitions, testTopic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	return src
}

// aclAdminClient is a superuser client of an aclSource.
func aclAdminClient(t *testing.T, src *kfake.Cluster) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.SASL(scram.Auth{User: aclAdmin, Pass: aclAdminPassword}.AsSha512Mechanism()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// aclGrant grants (or, without Allow, denies) the mirror's principal acl on the cluster admin talks to (as its
// superuser) and fails the test, naming what, if the cluster refuses.
func aclGrant(t *testing.T, admin *kgo.Client, what string, acl kfake.ACL) {
	t.Helper()
	grant := kmsg.NewCreateACLsRequestCreation()
	grant.ResourceType, grant.ResourceName, grant.ResourcePatternType = acl.Resource, acl.Name, acl.Pattern
	grant.Principal, grant.Host = "User:"+aclMirror, "*"
	grant.Operation, grant.PermissionType = acl.Operation, kmsg.ACLPermissionTypeDeny
	if acl.Allow {
		grant.PermissionType = kmsg.ACLPermissionTypeAllow
	}
	req := kmsg.NewPtrCreateACLsRequest()
	req.Creations = append(req.Creations, grant)
	resp, err := req.RequestWith(t.Context(), admin)
	if err == nil {
		err = kerr.ErrorForCode(resp.Results[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// aclMirrorSASL points cfg's source at the mirror's user, its password in a file.
func aclMirrorSASL(t *testing.T, cfg *config.Config) {
	pwFile := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(pwFile, []byte(aclMirrorPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Source.SASL = &config.SASL{Mechanism: config.SASLSCRAMSHA512, Username: aclMirror, PasswordFile: pwFile}
}

// TestSourceTopicHiddenByACLs: the source refuses the mirror's principal Describe on the
// mirrored topic (no Read or Describe ACL on it), so Kafka leaves the topic out of the
// metadata the principal sees: without asking, the engine cannot tell it from a topic
// that does not exist. For a literal include and for a regular expression, the engine
// asks the source about the name (or the expression's literal prefix), which answers
// TOPIC_AUTHORIZATION_FAILED, and reports it in the log and in Ready, naming the
// principal, DESCRIBE and the topic. Once Read is granted, every record is mirrored
// without a restart.
func TestSourceTopicHiddenByACLs(t *testing.T) {
	for _, tc := range []struct{ name, include, asked, name0 string }{
		{"literal", testTopic, `DESCRIBE TOPIC "orders"`, "orders"},
		{"regexp", "ord[a-z]+", `DESCRIBE TOPIC "ord"`, "ord"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const partitions, n = 2, 200
			group := "mirror-test"
			src := aclSource(t, partitions, kfake.ACL{Resource: kmsg.ACLResourceTypeGroup, Name: group,
				Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationRead, Allow: true})
			tgt, err := kfake.NewCluster(kfake.NumBrokers(1))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(tgt.Close)
			admin := aclAdminClient(t, src)
			w := newWorkload(partitions)
			var recs []*kgo.Record
			for p := int32(0); p < partitions; p++ {
				for i := range n {
					recs = append(recs, w.record(p, i))
				}
				w.next[p] = n
			}
			if err := admin.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
				t.Fatal(err)
			}

			c := &testClusters{source: src, target: tgt}
			cfg := c.testConfig(t, func(cfg *config.Config) {
				cfg.ConsumerGroup = group
				cfg.Topics.Include = []string{tc.include}
				aclMirrorSASL(t, cfg)
			})
			logs, log := newLogLines(t)
			r := startEngine(t, cfg, log)
			want := []string{"not authorized to " + tc.asked, `principal User:mirror`}
			testutil.WaitFor(t, 30*time.Second, "Ready to name the hidden topic", func() bool {
				err := r.e.Ready()
				return err != nil && strings.Contains(err.Error(), want[0]) && strings.Contains(err.Error(), want[1])
			})
			// (funcr escapes the quotes of the message.)
			if n := logs.count("Source topics may be hidden by the source's ACLs", "not authorized to DESCRIBE TOPIC", tc.name0, "User:mirror"); n != 1 {
				t.Errorf("%d log lines name the hidden topic %s and the principal, want 1 (once, not every interval)", n, tc.name0)
			}

			// Granted Read (which implies Describe), the topic appears and nothing is lost.
			aclGrant(t, admin, "granting Read", kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: "ord", Pattern: kmsg.ACLResourcePatternTypePrefixed, Operation: kmsg.ACLOperationRead, Allow: true})
			got := readTarget(t, tgt, testTopic, w.total(), time.Second, time.Minute)
			if res := audit(t, w, got, true, true); res.missing != 0 {
				t.Errorf("%d records missing after Read was granted", res.missing)
			}
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestIdempotentProducerRefused: the target's principal may do everything the mirror
// needs but Write on any topic, which Kafka (2.8 and later) requires, as IdempotentWrite
// on the cluster, for an idempotent producer: InitProducerId is refused with
// CLUSTER_AUTHORIZATION_FAILED before the first record. The engine stops with an error
// naming the principal, IDEMPOTENT_WRITE on CLUSTER and what to grant, having committed
// nothing; restarted once Write is granted (as its pod would be), it mirrors every
// record.
func TestIdempotentProducerRefused(t *testing.T) {
	const partitions, n = 2, 100
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, testTopic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	var acls []kfake.ACL
	for _, op := range []kmsg.ACLOperation{kmsg.ACLOperationDescribe, kmsg.ACLOperationRead, kmsg.ACLOperationCreate,
		kmsg.ACLOperationAlter, kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs} {
		acls = append(acls, kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: "*", Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: op, Allow: true})
	}
	acls = append(acls,
		kfake.ACL{Resource: kmsg.ACLResourceTypeGroup, Name: "*", Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationRead, Allow: true},
		kfake.ACL{Resource: kmsg.ACLResourceTypeCluster, Name: "kafka-cluster", Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationDescribeConfigs, Allow: true})
	tgt := aclSource(t, partitions, acls...) // the secured cluster is the target here
	w := newWorkload(partitions)
	w.produce(t, src, n)

	c := &testClusters{source: src, target: tgt}
	cfg := c.testConfig(t, func(cfg *config.Config) {
		aclMirrorSASL(t, cfg)
		cfg.Target.SASL, cfg.Source.SASL = cfg.Source.SASL, nil
	})
	r := startEngine(t, cfg, testLogger(t))
	err = r.wait(t, time.Minute)
	for _, want := range []string{`target principal User:mirror is not authorized to IDEMPOTENT_WRITE on CLUSTER "kafka-cluster"`, "grant Write on the target topics"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("Run = %v, want an error containing %q", err, want)
		}
	}

	admin := aclAdminClient(t, tgt)
	aclGrant(t, admin, "granting Write", kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: testTopic, Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationWrite, Allow: true})
	r = startEngine(t, cfg, testLogger(t))
	if got := countTargetAs(t, admin, testTopic, w.total(), time.Minute); got != w.total() {
		t.Errorf("the target holds %d distinct records of %d after Write was granted", got, w.total())
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// countTargetAs reads topic from the start through client until want distinct records
// (by their "id" header) were seen or timeout passed, and returns how many it saw.
func countTargetAs(t *testing.T, client *kgo.Client, topic string, want int, timeout time.Duration) int {
	t.Helper()
	client.AddConsumeTopics(topic)
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	seen := map[string]bool{}
	for len(seen) < want && ctx.Err() == nil {
		client.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			for _, h := range r.Headers {
				if h.Key == "id" {
					seen[string(h.Value)] = true
				}
			}
		})
	}
	return len(seen)
}

// TestTransactionalIDRefused: with delivery exactlyOnce the target's principal may do
// everything the mirror needs but Write on its transactional ids, so every session's
// fencing (InitProducerId) is refused with TRANSACTIONAL_ID_AUTHORIZATION_FAILED. The
// engine logged "Failed to consume from the source cluster; retrying" for every stream
// at every retry, and /readyz answered ready, its streams having joined. Now the log
// names the real cause (the target principal, WRITE on TRANSACTIONAL_ID, the id and
// the prefix to grant), one line per backoff for the whole engine, not per stream, and
// Ready answers with it until the ACL is granted; then every record is mirrored without
// a restart.
func TestTransactionalIDRefused(t *testing.T) {
	const partitions, n, streams = 4, 100, 3
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, testTopic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	var acls []kfake.ACL
	for _, op := range []kmsg.ACLOperation{kmsg.ACLOperationDescribe, kmsg.ACLOperationRead, kmsg.ACLOperationWrite, kmsg.ACLOperationCreate,
		kmsg.ACLOperationAlter, kmsg.ACLOperationDescribeConfigs, kmsg.ACLOperationAlterConfigs} {
		acls = append(acls, kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: "*", Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: op, Allow: true})
	}
	acls = append(acls,
		kfake.ACL{Resource: kmsg.ACLResourceTypeGroup, Name: "*", Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationRead, Allow: true},
		kfake.ACL{Resource: kmsg.ACLResourceTypeGroup, Name: "*", Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationDescribe, Allow: true},
		kfake.ACL{Resource: kmsg.ACLResourceTypeCluster, Name: "kafka-cluster", Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationDescribeConfigs, Allow: true},
		kfake.ACL{Resource: kmsg.ACLResourceTypeCluster, Name: "kafka-cluster", Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationIdempotentWrite, Allow: true})
	tgt := aclSource(t, partitions, acls...) // the secured cluster is the target here
	w := newWorkload(partitions)
	w.produce(t, src, n)

	c := &testClusters{source: src, target: tgt}
	cfg := c.exactlyOnceConfig(t, func(cfg *config.Config) {
		aclMirrorSASL(t, cfg)
		cfg.Target.SASL, cfg.Source.SASL = cfg.Source.SASL, nil
		cfg.Streams = streams
	})
	logs, log := newLogLines(t)
	r := startEngine(t, cfg, log)
	cause := `target principal User:mirror is not authorized to WRITE on TRANSACTIONAL_ID \"mirror-test/orders/`
	remedy := `grant Write on the transactional ids prefixed \"mirror-test/\"`
	testutil.WaitFor(t, 60*time.Second, "Ready to name the refused transactional id", func() bool {
		err := r.e.Ready()
		return err != nil && strings.Contains(err.Error(), strings.ReplaceAll(cause, `\"`, `"`)) &&
			strings.Contains(err.Error(), strings.ReplaceAll(remedy, `\"`, `"`))
	})
	testutil.WaitFor(t, 60*time.Second, "three log lines naming the refusal", func() bool {
		return logs.count(cause, remedy) >= 3
	})
	if n := logs.count("Failed to consume from the source cluster"); n != 0 {
		t.Errorf("%d lines blame consuming from the source for the target's refusal, want 0", n)
	}
	// One line per backoff (1 s, 2 s, 4 s, ...) for the engine: by the third, no stream
	// repeated one of the others'. Each of the streams logging its own would be about
	// three lines per backoff.
	lines := logs.count(cause, remedy)
	retries := logs.count("Was not authorized by the cluster's ACLs; retrying")
	t.Logf("%d log lines naming the refusal", lines)
	if lines > 4 || retries != lines {
		t.Errorf("%d log lines name the refusal (%d of them the retry line) by the third backoff, want at most 4, all of them the retry line", lines, retries)
	}

	admin := aclAdminClient(t, tgt)
	aclGrant(t, admin, "granting Write on the transactional ids", kfake.ACL{Resource: kmsg.ACLResourceTypeTransactionalId, Name: cfg.ConsumerGroup + "/", Pattern: kmsg.ACLResourcePatternTypePrefixed, Operation: kmsg.ACLOperationWrite, Allow: true})
	if got := countTargetAs(t, admin, testTopic, w.total(), 2*time.Minute); got != w.total() {
		t.Errorf("the target holds %d distinct records of %d after Write was granted", got, w.total())
	}
	testutil.WaitFor(t, 60*time.Second, "Ready once the ids are granted", func() bool { return r.e.Ready() == nil })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestSourceGroupHiddenByACLs: groups.include names a group the source's ACLs hide from
// the mirror's principal (no Describe on it): Kafka leaves it out of ListGroups, so it
// looks like a group that does not exist and would silently never be translated. The
// engine asks for the named group, is refused GROUP_AUTHORIZATION_FAILED, and says so
// once, naming the principal, DESCRIBE and the group. Once Describe is granted, the
// group's offset is translated to the target without a restart.
func TestSourceGroupHiddenByACLs(t *testing.T) {
	const partitions, n, app = 2, 100, "app.orders"
	group := "mirror-test"
	src := aclSource(t, partitions,
		kfake.ACL{Resource: kmsg.ACLResourceTypeGroup, Name: group, Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationRead, Allow: true},
		kfake.ACL{Resource: kmsg.ACLResourceTypeTopic, Name: testTopic, Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationRead, Allow: true})
	tgt, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tgt.Close)
	admin := aclAdminClient(t, src)
	w := newWorkload(partitions)
	var recs []*kgo.Record
	for p := int32(0); p < partitions; p++ {
		for i := range n {
			recs = append(recs, w.record(p, i))
		}
		w.next[p] = n
	}
	if err := admin.ProduceSync(t.Context(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	// The application read 40 records of partition 0 and committed.
	commit := kmsg.NewPtrOffsetCommitRequest()
	commit.Group, commit.Generation = app, -1
	ct := kmsg.NewOffsetCommitRequestTopic()
	ct.Topic = testTopic
	// OffsetCommit v10 names the topic by its ID.
	topicsMeta, err := kadm.NewClient(admin).ListTopics(t.Context(), testTopic)
	if err != nil {
		t.Fatal(err)
	}
	ct.TopicID = topicsMeta[testTopic].ID
	cp := kmsg.NewOffsetCommitRequestTopicPartition()
	cp.Partition, cp.Offset = 0, 40
	ct.Partitions = append(ct.Partitions, cp)
	commit.Topics = append(commit.Topics, ct)
	cresp, err := commit.RequestWith(t.Context(), admin)
	if err == nil {
		err = kerr.ErrorForCode(cresp.Topics[0].Partitions[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("committing the application group: %v", err)
	}

	c := &testClusters{source: src, target: tgt}
	cfg := c.testConfig(t, func(cfg *config.Config) {
		cfg.ConsumerGroup = group
		cfg.Groups = &config.Groups{Include: []string{`app\.orders`}, SyncInterval: config.Duration{Duration: 200 * time.Millisecond}}
		aclMirrorSASL(t, cfg)
	})
	logs, log := newLogLines(t)
	r := startEngine(t, cfg, log)
	testutil.WaitFor(t, 30*time.Second, "a log line naming the hidden group", func() bool {
		return logs.count("Source consumer group hidden by the source's ACLs", `DESCRIBE GROUP`, app, "User:mirror") > 0
	})
	readTarget(t, tgt, testTopic, w.total(), time.Second, time.Minute)
	if n := logs.count("Source consumer group hidden by the source's ACLs"); n != 1 {
		t.Errorf("%d log lines name the hidden group, want 1 (once, not every round)", n)
	}

	aclGrant(t, admin, "granting Describe", kfake.ACL{Resource: kmsg.ACLResourceTypeGroup, Name: app, Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: kmsg.ACLOperationDescribe, Allow: true})
	tadmin := targetAdmin(t, c)
	testutil.WaitFor(t, 30*time.Second, "the group translated on the target", func() bool {
		resp, err := tadmin.ListConsumerGroupOffsets(app, map[string][]int32{testTopic: {0}})
		if err != nil {
			return false
		}
		b := resp.GetBlock(testTopic, 0)
		return b != nil && b.Offset == 40
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}
