package kafka

import (
	"fmt"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// Principal returns the Kafka principal a cluster knows the mirror as, for messages
// naming a missing ACL: "User:<username>" for PLAIN and SCRAM (Kafka's default
// principal builder), "" when the broker derives it from something the mirror cannot
// see (a TLS client certificate, an OAuth token, an IAM role) or there is no SASL.
func Principal(c config.Cluster) string {
	if c.SASL == nil || c.SASL.Username == "" {
		return ""
	}
	switch c.SASL.Mechanism {
	case config.SASLPlain, config.SASLSCRAMSHA256, config.SASLSCRAMSHA512:
		return "User:" + c.SASL.Username
	}
	return ""
}

// NotAuthorized says that principal (Principal's answer, "" when unknown) of the role's
// cluster may not perform operation on a resource, in the words of Kafka's ACLs, for
// example `the target principal User:mirror is not authorized to WRITE on
// TRANSACTIONAL_ID "orders/0"`.
func NotAuthorized(role, principal, operation, resourceType, name string) string {
	who := "the " + role + " principal"
	if principal != "" {
		who += " " + principal
	}
	return fmt.Sprintf("%s is not authorized to %s on %s %q", who, operation, resourceType, name)
}

// ClusterResource is the name of Kafka's one CLUSTER resource, as ACLs name it.
const ClusterResource = "kafka-cluster"
