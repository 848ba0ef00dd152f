//go:build kafka

package e2ekafka

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/audit"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/e2eharness"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/realkafka"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The mirror's principals on the secure clusters.
const (
	sourceUser = "mirror-source"
	targetUser = "mirror-target"
	// topicPrefix is what every mirrored topic's name starts with (Topics.Include e2e\..*),
	// so that prefixed ACLs can grant exactly the mirrored topics.
	topicPrefix = "e2e."
)

// aclRule is one ACL of the documented set (docs/security.md, "Kafka ACLs"), on the
// cluster it belongs to, and what the mirror does without it.
type aclRule struct {
	cluster string // "source" or "target"
	acl     realkafka.ACL
	// blocks says that without the ACL the mirror cannot mirror a new topic; otherwise it
	// mirrors everything and only the feature the ACL serves is missing.
	blocks bool
	// says are what a warning or error line must contain without the ACL, each entry
	// one word or alternatives separated by "|" (case-insensitive).
	says []string
	// exercise prepares the new topic so that the mirror needs the ACL: "" (the target
	// topic is left to topic sync), "expand" (the target topic exists with fewer
	// partitions), "configs" (the source topic has a config the existing target topic
	// lacks), "progress" (the progress topic exists: its configs are then checked).
	exercise string
}

func (r aclRule) String() string { return r.cluster + " " + r.acl.String() }

// mirrorACLs is exactly the set docs/security.md lists for a mirror with topic sync
// (syncTopics and syncTopicConfigs on, the defaults) whose topics all start with
// topicPrefix and whose consumer group is group; exactly-once adds Write on the
// transactional ids prefixed "<group>/".
func mirrorACLs(group string, exactlyOnce bool) []aclRule {
	rule := func(cluster string, res kmsg.ACLResourceType, name string, prefixed bool, op kadm.ACLOperation, blocks bool, exercise string, says ...string) aclRule {
		user := sourceUser
		if cluster == "target" {
			user = targetUser
		}
		return aclRule{cluster: cluster, blocks: blocks, says: says, exercise: exercise,
			acl: realkafka.ACL{Principal: "User:" + user, Resource: res, Name: name, Prefixed: prefixed, Operation: op}}
	}
	topic, grp, cluster := kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeGroup, kmsg.ACLResourceTypeCluster
	denied := "authoriz|permission|acl"
	progress := mirror.ProgressTopic(group)
	rules := []aclRule{
		rule("source", topic, topicPrefix, true, kadm.OpRead, true, "", "source", "topic", denied),
		rule("source", topic, topicPrefix, true, kadm.OpDescribeConfigs, false, "", "source", "topic", "config", denied),
		rule("source", grp, group, false, kadm.OpRead, true, "", "source", "group", denied),
		rule("target", topic, topicPrefix, true, kadm.OpWrite, true, "", "target", "topic", denied),
		rule("target", topic, topicPrefix, true, kadm.OpRead, false, "", "target", "topic", denied),
		rule("target", topic, topicPrefix, true, kadm.OpCreate, true, "", "target", "topic", denied),
		rule("target", topic, topicPrefix, true, kadm.OpAlter, true, "expand", "target", "topic", "partition", denied),
		// No DescribeConfigs on the target topics: AlterConfigs implies it (Kafka's
		// authorizer), so its removal changed nothing here (the documented set held an
		// ACL the mirror does not need). topics.TestReadMessageLimitsRefused checks what
		// the engine says without both.
		rule("target", topic, topicPrefix, true, kadm.OpAlterConfigs, false, "configs", "target", "topic", "config", denied),
		rule("target", grp, group+".source-offsets", false, kadm.OpRead, false, "", "target", "group", denied),
		// The progress topic: without any of these only the copy of the progress that
		// outlives both groups' offset retention is missing.
		rule("target", topic, progress, false, kadm.OpCreate, false, "", "progress topic", denied),
		rule("target", topic, progress, false, kadm.OpDescribeConfigs, false, "progress", "progress topic", "config", denied),
		rule("target", topic, progress, false, kadm.OpWrite, false, "", "progress topic", denied),
		rule("target", topic, progress, false, kadm.OpRead, false, "", "progress topic", denied),
		rule("target", cluster, "", false, kadm.OpDescribeConfigs, false, "", "target", "message.max.bytes", denied),
	}
	if exactlyOnce {
		rules = append(rules, rule("target", kmsg.ACLResourceTypeTransactionalId, group+"/", true, kadm.OpWrite, true, "", "target", "transactional", denied))
	}
	return rules
}

// grant creates rules on their clusters.
func (s *scenario) grant(rules ...aclRule) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, r := range rules {
		if err := s.cluster(r.cluster).Grant(ctx, r.acl); err != nil {
			s.t.Fatal(err)
		}
	}
}

// revoke deletes rules from their clusters.
func (s *scenario) revoke(rules ...aclRule) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, r := range rules {
		if err := s.cluster(r.cluster).Revoke(ctx, r.acl); err != nil {
			s.t.Fatal(err)
		}
	}
}

func (s *scenario) cluster(name string) *realkafka.Cluster {
	if name == "source" {
		return s.src
	}
	return s.dst
}

// secure points cfg at the SASL_SSL listeners as the mirror's SCRAM-SHA-512 users,
// trusting each cluster's test CA, with the passwords in files as a pod mounts them.
func (s *scenario) secure(c *config.Config) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, side := range []struct {
		cl   *realkafka.Cluster
		cfg  *config.Cluster
		user string
	}{{s.src, &c.Source, sourceUser}, {s.dst, &c.Target, targetUser}} {
		password := side.user + "-password"
		if err := side.cl.AddSCRAMUser(ctx, side.user, password); err != nil {
			s.t.Fatal(err)
		}
		pwFile := filepath.Join(s.dir, side.user+".password")
		if err := os.WriteFile(pwFile, []byte(password+"\n"), 0o600); err != nil {
			s.t.Fatal(err)
		}
		side.cfg.BootstrapServers = side.cl.SecureAddrs()
		side.cfg.TLS = &config.TLS{CAFile: side.cl.CAFile()}
		side.cfg.SASL = &config.SASL{Mechanism: config.SASLSCRAMSHA512, Username: side.user, PasswordFile: pwFile}
	}
}

// TestSmokeSCRAMACLs: both clusters authenticate with SCRAM-SHA-512 over TLS (a test CA)
// and authorize with the StandardAuthorizer, allowing nothing but exactly the ACLs
// docs/security.md lists for the mirror's two principals. The engine creates the target
// topics itself (topic sync) and mirrors every record: the set suffices.
func TestSmokeSCRAMACLs(t *testing.T) {
	s := newScenario(t, world{secure: true, noTargetTopics: true}, smokeTopics())
	rules := mirrorACLs(s.group, false)
	s.grant(rules...)
	cfg := s.config(func(c *config.Config) {
		s.secure(c)
		c.SyncTopics = config.BoolPtr(true)
		c.Handlers = skipFilter
	})
	w := s.workload(20_000, 2000, skipFraction)
	e := s.startJoined("engine", cfg)
	p := s.produce(w).Wait(t)
	rep := s.waitComplete(p, audit.Options{Filtered: audit.SkipHeaderFiltered})
	e.StopCleanly(time.Minute)
	s.assertAudit(rep, 0)
	s.figures(rep, map[string]any{"brokers": 1, "auth": "SASL_SSL SCRAM-SHA-512", "acls": len(rules)})
}

// TestACLEachRemoved: on secure clusters holding the documented set (exactly-once's
// included; its rule is tried with delivery exactlyOnce), each ACL is taken away in turn while 1,000 records wait in a new topic. Without it the engine must name
// the missing permission (the cluster, the resource, "not authorized") in a warning or
// error, mirror nothing it cannot (blocks) or everything else (a feature degrades), lose
// nothing, and mirror every record once the ACL is back. A rule whose removal changes
// nothing would mean the documented set is larger than needed.
func TestACLEachRemoved(t *testing.T) {
	s := newScenario(t, world{secure: true, noTargetTopics: true}, map[string]int32{})
	rules := mirrorACLs(s.group, true)
	s.grant(rules...)
	cfg := s.config(func(c *config.Config) {
		s.secure(c)
		c.SyncTopics = config.BoolPtr(true)
		// A refusal the client retries (a transactional id it may not use) becomes an
		// error after deliveryTimeout: keep that well inside aclReportTimeout.
		c.DeliveryTimeout = config.Duration{Duration: 30 * time.Second}
	})
	eos := cfg
	exactlyOnce(&eos)
	for i, r := range rules {
		t.Run(r.String(), func(t *testing.T) {
			ss := *s
			ss.t, ss.start = t, time.Now()
			topic := fmt.Sprintf("e2e.acl%02d", i)
			ss.topics = map[string]int32{topic: 2}
			ss.prepare(r.exercise, topic)
			p := ss.produce(ss.workload(1000, 0, 0)).Wait(t)
			ss.revoke(r)
			t.Cleanup(func() { // also when the subtest failed, for the next one
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				_ = ss.cluster(r.cluster).Grant(ctx, r.acl)
			})
			cfg := cfg
			if r.acl.Resource == kmsg.ACLResourceTypeTransactionalId {
				cfg = eos
			}
			e := ss.startEngine(fmt.Sprintf("engine-%02d", i), cfg)
			line, complete := ss.watchRevoked(e, r, p)
			switch {
			case line == "":
				t.Errorf("without %s the engine logged no warning or error containing %q within %v; its log ends:\n%s", r, r.says, aclReportTimeout, e.LogTail(15))
			case r.blocks && complete:
				t.Errorf("without %s the engine still mirrored every record of %s: the documented set holds an ACL the mirror does not need", r, topic)
			case !r.blocks && !complete:
				t.Errorf("without %s the engine did not mirror every record of %s within %v, though only a feature should degrade", r, topic, aclReportTimeout)
			}
			t.Logf("without %s (blocks %v, complete %v): %.300s", r, r.blocks, complete, line)
			ss.grant(r)
			// An engine that stopped on the refusal (a send that finally failed) exits
			// non-zero, to be restarted as its pod would be: wait for the exit, so that
			// it is not taken for a running engine.
			if len(e.LogLines("Stopped the mirror on a fatal error")) > 0 {
				select {
				case <-e.Done():
				case <-time.After(2 * time.Minute):
					t.Fatalf("engine %s logged a fatal error but did not exit within 2m; log tail:\n%s", e.Name, e.LogTail(20))
				}
			}
			if !e.Running() {
				e = ss.startEngine(fmt.Sprintf("engine-%02d-after", i), cfg)
			}
			rep := ss.waitComplete(p, audit.Options{})
			e.StopCleanly(time.Minute)
			ss.assertAudit(rep, len(p.Records))
			ss.figures(rep, map[string]any{"without": r.String(), "reported": line != ""})
		})
	}
}

// aclReportTimeout bounds the wait for the engine to report a missing ACL (and, when the
// ACL only serves a feature, to mirror the new topic anyway): topic sync runs every 2 s,
// a group join takes a few, a refusal the client retries ends after deliveryTimeout (30 s
// here).
const aclReportTimeout = 90 * time.Second

// prepare creates the iteration's source topic and, as exercise says, its target topic.
func (s *scenario) prepare(exercise, topic string) {
	s.t.Helper()
	switch exercise {
	case "":
		createTopics(s.t, s.src, s.topics, 1, nil)
	case "expand":
		createTopics(s.t, s.src, s.topics, 1, nil)
		createTopics(s.t, s.dst, map[string]int32{topic: 1}, 1, nil)
	case "progress":
		createTopics(s.t, s.src, s.topics, 1, nil)
		ctx, cancel := context.WithTimeout(context.Background(), adminTimeout)
		defer cancel()
		compact := "compact"
		// An earlier subtest's engine may have created it already (kadm returns the
		// topic's error as the error too).
		_, err := s.dst.Admin().CreateTopic(ctx, 1, 1, map[string]*string{"cleanup.policy": &compact}, mirror.ProgressTopic(s.group))
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			s.t.Fatalf("creating the progress topic: %v", err)
		}
	case "configs":
		retention := "604800123" // a week and a bit: a value no default has
		createTopics(s.t, s.src, s.topics, 1, map[string]*string{"retention.ms": &retention})
		createTopics(s.t, s.dst, s.topics, 1, nil)
	default:
		s.t.Fatalf("unknown exercise %q", exercise)
	}
}

// watchRevoked waits up to aclReportTimeout for an engine line matching r.says and, for
// a rule that does not block, for the new topic to be complete on the target. It
// returns the line ("" if none) and whether the topic was complete at the end.
func (s *scenario) watchRevoked(e *engine, r aclRule, p *audit.Produced) (string, bool) {
	s.t.Helper()
	deadline := time.Now().Add(aclReportTimeout)
	var line string
	complete := false
	for time.Now().Before(deadline) {
		if line == "" {
			line = firstMatch(e.LogPath(), r.says, append(e2eharness.TopicNames(s.topics), s.group, mirror.ProgressTopic(s.group))...)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		m, err := audit.ReadAll(ctx, s.dst.Addrs(), e2eharness.TopicNames(s.topics), audit.ReadOptions{Timeout: 10 * time.Second})
		cancel()
		complete = err == nil && audit.Audit(p, m, audit.Options{}).Total.Lost == 0
		if line != "" && (r.blocks || complete) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	return line, complete
}

// firstMatch returns the first warning or error line of the engine log at path (JSON
// level warn or error, or the plain "Error: ..." line it prints last) containing every
// one of says, each entry a word or alternatives separated by "|", case-insensitive.
// The names (the scenario's group and topics) are cut out of a line before it is
// matched: "e2e.acl03" or a group named after TestACLEachRemoved must not pass for the
// word "acl" of an engine that never said why it was refused.
func firstMatch(path string, says []string, names ...string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		lower := strings.ToLower(line)
		for _, n := range names {
			if n != "" {
				lower = strings.ReplaceAll(lower, strings.ToLower(n), "")
			}
		}
		if !strings.Contains(lower, `"level":"warn"`) && !strings.Contains(lower, `"level":"error"`) && !strings.HasPrefix(lower, "error:") {
			continue
		}
		all := true
		for _, want := range says {
			any := false
			for _, alt := range strings.Split(strings.ToLower(want), "|") {
				any = any || strings.Contains(lower, alt)
			}
			all = all && any
		}
		if all {
			return line
		}
	}
	return ""
}
