package kafka

import "github.com/kafka-mirror/kafka-mirror-operator/mirror/config"

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
