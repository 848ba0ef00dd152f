package topics

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
)

// TestReadMessageLimitsRefused: a target that refuses the mirror's principal
// DescribeConfigs (kfake with ACLs: the principal may Describe the topic, nothing
// more). ReadMessageLimits still answers with the defaults, but no longer silently:
// Unread names each refusal, the operation and the resource (DESCRIBE_CONFIGS on
// CLUSTER for message.max.bytes, on TOPIC for max.message.bytes). Granted both, Unread
// is empty and the topic's own limit is read.
func TestReadMessageLimitsRefused(t *testing.T) {
	const user, password = "mirror", "mirror-Password"
	allow := func(res kmsg.ACLResourceType, name string, op kmsg.ACLOperation) kfake.ACL {
		return kfake.ACL{Resource: res, Name: name, Pattern: kmsg.ACLResourcePatternTypeLiteral, Operation: op, Allow: true}
	}
	describe := allow(kmsg.ACLResourceTypeTopic, "orders", kmsg.ACLOperationDescribe)
	for _, tc := range []struct {
		name  string
		acls  []kfake.ACL
		want  []string
		limit int
	}{
		{"refused", []kfake.ACL{describe},
			[]string{`not authorized to DESCRIBE_CONFIGS on CLUSTER "kafka-cluster"`, `max.message.bytes of target topic "orders": not authorized to DESCRIBE_CONFIGS on TOPIC "orders"`},
			DefaultMaxMessageBytes},
		{"granted", []kfake.ACL{describe, allow(kmsg.ACLResourceTypeTopic, "orders", kmsg.ACLOperationDescribeConfigs),
			allow(kmsg.ACLResourceTypeCluster, "kafka-cluster", kmsg.ACLOperationDescribeConfigs)},
			nil, 65536},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, kfake.EnableSASL(), kfake.EnableACLs(), kfake.Superuser(config.SASLSCRAMSHA512, "admin", "admin-Password"),
				kfake.User(config.SASLSCRAMSHA512, user, password, tc.acls...))
			asUser := func(name, pw string) sarama.ClusterAdmin {
				pwFile := filepath.Join(t.TempDir(), "password")
				if err := os.WriteFile(pwFile, []byte(pw), 0o600); err != nil {
					t.Fatal(err)
				}
				a, err := kafka.NewClusterAdmin(config.Cluster{BootstrapServers: c.ListenAddrs(),
					SASL: &config.SASL{Mechanism: config.SASLSCRAMSHA512, Username: name, PasswordFile: pwFile}})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = a.Close() })
				return a
			}
			createTopic(t, asUser("admin", "admin-Password"), "orders", 1, map[string]string{"max.message.bytes": "65536"})
			got, err := ReadMessageLimits(asUser(user, password), []string{"orders"})
			if err != nil {
				t.Fatal(err)
			}
			if got.Topics["orders"] != tc.limit {
				t.Errorf("limit of orders %d, want %d", got.Topics["orders"], tc.limit)
			}
			if len(got.Unread) != len(tc.want) {
				t.Fatalf("Unread = %v, want %d errors containing %q", got.Unread, len(tc.want), tc.want)
			}
			for i, want := range tc.want {
				if err := got.Unread[i]; !strings.Contains(err.Error(), want) || !IsAuthorization(err) || errors.Unwrap(err) == nil {
					t.Errorf("Unread[%d] = %v, want an authorization error containing %q", i, err, want)
				}
			}
		})
	}
}
