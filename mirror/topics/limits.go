package topics

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/IBM/sarama"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
)

// Names of the size limits a Kafka broker checks each record batch against.
const (
	topicMaxMessageBytes  = "max.message.bytes"
	brokerMessageMaxBytes = "message.max.bytes"
)

// DefaultMaxMessageBytes is Kafka's default message.max.bytes (1 MiB plus the 12-byte
// log overhead), assumed when the target does not say.
const DefaultMaxMessageBytes = 1048588

// MessageLimits are the size limits of a cluster's record batches, in bytes.
type MessageLimits struct {
	// Broker is the broker's message.max.bytes, DefaultMaxMessageBytes when unknown.
	Broker int
	// Topics holds each described topic's limit.
	Topics map[string]int
	// Unread says which limits could not be read (a refused DescribeConfigs above all),
	// each error naming the operation and resource; Broker and Topics hold the values
	// assumed in their place. A topic not created yet is not among them.
	Unread []error
}

// IsAuthorization reports whether err is a broker refusing the principal an operation
// (a missing ACL): on a topic, a group, the cluster or a transactional id.
func IsAuthorization(err error) bool {
	for _, k := range []sarama.KError{sarama.ErrTopicAuthorizationFailed, sarama.ErrGroupAuthorizationFailed,
		sarama.ErrClusterAuthorizationFailed, sarama.ErrTransactionalIDAuthorizationFailed} {
		if errors.Is(err, k) {
			return true
		}
	}
	return false
}

// refusal names, when err is an authorization error, the operation and the resource
// refused, so that the line says which ACL is missing; other errors are unchanged.
func refusal(operation, resourceType, name string, err error) error {
	if !IsAuthorization(err) {
		return err
	}
	return fmt.Errorf("not authorized to %s on %s %q: %w", operation, resourceType, name, err)
}

// ReadMessageLimits returns, for every topic, the largest record batch the cluster
// behind admin accepts for it: the topic's own max.message.bytes when it is set on the
// topic, else the broker's message.max.bytes, else what the topic describe said, else
// DefaultMaxMessageBytes. Topics missing from the answer (for example not created yet)
// get the broker's value. The error is set only when nothing could be read.
func ReadMessageLimits(admin sarama.ClusterAdmin, topics []string) (MessageLimits, error) {
	out := make(map[string]int, len(topics))
	broker, brokerErr := brokerMessageLimit(admin)
	if brokerErr != nil {
		broker = DefaultMaxMessageBytes
	}
	if len(topics) == 0 {
		return MessageLimits{Broker: broker, Topics: out}, brokerErr
	}
	resources := make([]*sarama.ConfigResource, 0, len(topics))
	for _, t := range topics {
		resources = append(resources, &sarama.ConfigResource{Type: sarama.TopicResource, Name: t, ConfigNames: []string{topicMaxMessageBytes}})
	}
	results, topicErr := admin.DescribeConfigs(resources, sarama.DescribeConfigsOptions{})
	var unread []error
	if brokerErr != nil {
		unread = append(unread, brokerErr)
	}
	if topicErr != nil {
		unread = append(unread, fmt.Errorf("while describing the %s of target topics %q: %w", topicMaxMessageBytes, topics, topicErr))
	}
	// described holds the value a topic describe returned without it being set on the
	// topic: a broker may report its static default there rather than its dynamic one.
	described := map[string]int{}
	for _, r := range results {
		if r.ErrorCode != sarama.ErrNoError {
			if r.ErrorCode != sarama.ErrUnknownTopicOrPartition {
				unread = append(unread, fmt.Errorf("while describing the %s of target topic %q: %w", topicMaxMessageBytes, r.Name,
					refusal("DESCRIBE_CONFIGS", "TOPIC", r.Name, describeError(r))))
			}
			continue
		}
		for _, e := range r.Configs {
			n, err := strconv.Atoi(e.Value)
			if e.Name != topicMaxMessageBytes || err != nil || n <= 0 {
				continue
			}
			if e.Source == sarama.SourceTopic {
				out[r.Name] = n
			} else {
				described[r.Name] = n
			}
		}
	}
	if topicErr != nil && brokerErr != nil {
		return MessageLimits{}, fmt.Errorf("while describing the max.message.bytes of target topics: %w", topicErr)
	}
	for _, t := range topics {
		if _, ok := out[t]; ok {
			continue
		}
		switch n, ok := described[t]; {
		case brokerErr == nil:
			out[t] = broker
		case ok:
			out[t] = n
		default:
			out[t] = DefaultMaxMessageBytes
		}
	}
	return MessageLimits{Broker: broker, Topics: out, Unread: unread}, nil
}

// brokerMessageLimit reads message.max.bytes from the cluster's controller (any broker
// would do: the dynamic cluster-wide value is the same on each).
func brokerMessageLimit(admin sarama.ClusterAdmin) (int, error) {
	_, controller, err := admin.DescribeCluster()
	if err != nil {
		return 0, fmt.Errorf("while describing the cluster: %w", err)
	}
	entries, err := admin.DescribeConfig(sarama.ConfigResource{
		Type: sarama.BrokerResource, Name: strconv.Itoa(int(controller)), ConfigNames: []string{brokerMessageMaxBytes},
	})
	if err != nil {
		return 0, fmt.Errorf("while describing broker %d's %s: %w", controller, brokerMessageMaxBytes, refusal("DESCRIBE_CONFIGS", "CLUSTER", kafka.ClusterResource, err))
	}
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Value); e.Name == brokerMessageMaxBytes && err == nil && n > 0 {
			return n, nil
		}
	}
	return 0, fmt.Errorf("broker %d did not report %s", controller, brokerMessageMaxBytes)
}
