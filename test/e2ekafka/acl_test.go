//go:build kafka

package e2ekafka

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/audit"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/realkafka"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/twmb/franz-go/pkg/kadm"
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
// cluster it belongs to.
type aclRule struct {
	cluster string // "source" or "target"
	acl     realkafka.ACL
}

// mirrorACLs is exactly the set docs/security.md lists for an at-least-once mirror with
// topic sync (syncTopics and syncTopicConfigs on, the defaults) whose topics all start
// with topicPrefix and whose consumer group is group.
func mirrorACLs(group string) []aclRule {
	src := func(res kmsg.ACLResourceType, name string, prefixed bool, op kadm.ACLOperation) aclRule {
		return aclRule{"source", realkafka.ACL{Principal: "User:" + sourceUser, Resource: res, Name: name, Prefixed: prefixed, Operation: op}}
	}
	dst := func(res kmsg.ACLResourceType, name string, prefixed bool, op kadm.ACLOperation) aclRule {
		return aclRule{"target", realkafka.ACL{Principal: "User:" + targetUser, Resource: res, Name: name, Prefixed: prefixed, Operation: op}}
	}
	topic, grp := kmsg.ACLResourceTypeTopic, kmsg.ACLResourceTypeGroup
	return []aclRule{
		src(topic, topicPrefix, true, kadm.OpRead),
		src(topic, topicPrefix, true, kadm.OpDescribeConfigs),
		src(grp, group, false, kadm.OpRead),
		dst(topic, topicPrefix, true, kadm.OpWrite),
		dst(topic, topicPrefix, true, kadm.OpRead),
		dst(topic, topicPrefix, true, kadm.OpCreate),
		dst(topic, topicPrefix, true, kadm.OpAlter),
		dst(topic, topicPrefix, true, kadm.OpDescribeConfigs),
		dst(topic, topicPrefix, true, kadm.OpAlterConfigs),
		dst(grp, group+".source-offsets", false, kadm.OpRead),
	}
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
	rules := mirrorACLs(s.group)
	s.grant(rules...)
	cfg := s.config(func(c *config.Config) {
		s.secure(c)
		c.SyncTopics = config.BoolPtr(true)
		c.Handlers = skipFilter
	})
	w := s.workload(20_000, 2000, skipFraction)
	e := s.startEngine("engine", cfg)
	p := s.produce(w).wait(t)
	rep := s.waitComplete(p, audit.Options{Filtered: audit.SkipHeaderFiltered})
	e.stop(time.Minute)
	s.assertAudit(rep, 0)
	s.figures(rep, map[string]any{"brokers": 1, "auth": "SASL_SSL SCRAM-SHA-512", "acls": len(rules)})
}
