package topics

import (
	"fmt"
	"strconv"

	"github.com/IBM/sarama"
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
	// described holds the value a topic describe returned without it being set on the
	// topic: a broker may report its static default there rather than its dynamic one.
	described := map[string]int{}
	for _, r := range results {
		if r.ErrorCode != sarama.ErrNoError {
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
	return MessageLimits{Broker: broker, Topics: out}, nil
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
		return 0, fmt.Errorf("while describing broker %d's %s: %w", controller, brokerMessageMaxBytes, err)
	}
	for _, e := range entries {
		if n, err := strconv.Atoi(e.Value); e.Name == brokerMessageMaxBytes && err == nil && n > 0 {
			return n, nil
		}
	}
	return 0, fmt.Errorf("broker %d did not report %s", controller, brokerMessageMaxBytes)
}
