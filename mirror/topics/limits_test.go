package topics

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

func TestReadMessageLimits(t *testing.T) {
	tests := map[string]struct {
		brokerConfigs map[string]string
		topicConfigs  map[string]string
		wantTopic     int
		wantBroker    int
	}{
		"topic limit set on the topic": {
			topicConfigs: map[string]string{"max.message.bytes": "65536"},
			wantTopic:    65536,
			wantBroker:   DefaultMaxMessageBytes,
		},
		"topic limit unset: the broker's message.max.bytes": {
			brokerConfigs: map[string]string{"message.max.bytes": "5242880"},
			wantTopic:     5242880,
			wantBroker:    5242880,
		},
		"topic limit wins over the broker's": {
			brokerConfigs: map[string]string{"message.max.bytes": "5242880"},
			topicConfigs:  map[string]string{"max.message.bytes": "10485760"},
			wantTopic:     10485760,
			wantBroker:    5242880,
		},
		"nothing set: Kafka's default": {
			wantTopic:  DefaultMaxMessageBytes,
			wantBroker: DefaultMaxMessageBytes,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := newCluster(t, kfake.BrokerConfigs(tc.brokerConfigs))
			a := newAdmin(t, c)
			createTopic(t, a, "orders", 2, tc.topicConfigs)
			got, err := ReadMessageLimits(a, []string{"orders", "not-created-yet"})
			if err != nil {
				t.Fatal(err)
			}
			if got.Topics["orders"] != tc.wantTopic || got.Broker != tc.wantBroker {
				t.Fatalf("orders %d, broker %d; want %d, %d", got.Topics["orders"], got.Broker, tc.wantTopic, tc.wantBroker)
			}
			// A topic that does not exist yet will be created with the broker's limit.
			if got.Topics["not-created-yet"] != tc.wantBroker {
				t.Fatalf("missing topic %d, want the broker's %d", got.Topics["not-created-yet"], tc.wantBroker)
			}
		})
	}
}
