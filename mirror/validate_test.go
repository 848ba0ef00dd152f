package mirror

import (
	"strings"
	"testing"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

func TestValidateConfig(t *testing.T) {
	valid := func() *config.Config {
		c := &config.Config{
			Source:        config.Cluster{BootstrapServers: []string{"s:9092"}},
			Target:        config.Cluster{BootstrapServers: []string{"t:9092"}},
			ConsumerGroup: "g",
			Topics:        config.Topics{Include: []string{"orders\\..*"}},
		}
		c.Default()
		return c
	}
	tests := map[string]struct {
		mutate func(*config.Config)
		want   []string // substrings that must all appear; none means valid
	}{
		"valid": {mutate: func(*config.Config) {}},
		"bad cel filter": {
			mutate: func(c *config.Config) {
				c.Handlers = []config.HandlerSpec{{CEL: &config.CELHandler{Filter: "record.nope +", OnError: config.OnErrorFail}}}
			},
			want: []string{"handlers[0].cel.filter"},
		},
		"unknown named handler": {
			mutate: func(c *config.Config) { c.Handlers = []config.HandlerSpec{{Name: "no-such-handler"}} },
			want:   []string{"handlers[0].name"},
		},
		"unknown rebalance listener": {
			mutate: func(c *config.Config) { c.RebalanceListener = &config.PluginSpec{Name: "no-such-listener"} },
			want:   []string{"rebalanceListener.name"},
		},
		"bad include regex and missing group at once": {
			mutate: func(c *config.Config) { c.Topics.Include = []string{"orders("}; c.ConsumerGroup = "" },
			want:   []string{"topics.include[0]", "consumerGroup"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := valid()
			tc.mutate(c)
			err := ValidateConfig(c)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("ValidateConfig = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ValidateConfig = nil, want errors naming %v", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("ValidateConfig = %q, want it to name %q", err, w)
				}
			}
		})
	}
}
