package mirror

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// TestStopDuringStartIsBounded stops the engine while a start-up step waits for a
// target that swallows its requests: while it connects (Metadata), while the topic
// sync creates the target topic (CreateTopics), and while the producers open
// (InitProducerId, which the idempotent producer sends as it is created). Run must
// return within the drain bound (3 x (drain + commit)), nil, in both delivery modes;
// it used to wait for sarama's read timeout (30 s) and retries: 34 s after the stop
// with InitProducerId swallowed.
func TestStopDuringStartIsBounded(t *testing.T) {
	const drain = 2 * time.Second
	tests := map[string]struct {
		key         kmsg.Key
		exactlyOnce bool
	}{
		"connecting":                 {key: kmsg.Metadata},
		"creating the target topic":  {key: kmsg.CreateTopics},
		"opening the producers":      {key: kmsg.InitProducerID},
		"opening the producers (EO)": {key: kmsg.InitProducerID, exactlyOnce: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := newClusters(t, 2)
			newWorkload(2).produce(t, c.source, 10)
			var swallowed atomic.Int64
			c.target.ControlKey(tc.key.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
				c.target.KeepControl()
				swallowed.Add(1)
				return nil, nil, true
			})
			cfg := c.testConfig(t, func(cfg *config.Config) {
				if tc.exactlyOnce {
					cfg.Delivery = config.DeliveryExactlyOnce
					cfg.TransactionInterval = config.Duration{Duration: 100 * time.Millisecond}
				}
			})
			r := startEngine(t, cfg, testLogger(t), WithDrainTimeout(drain))
			testutil.WaitFor(t, 60*time.Second, "the engine waiting for a swallowed request", func() bool { return swallowed.Load() > 0 })
			ceiling := stopCeiling(drain)
			took := stopWithin(t, r, 90*time.Second)
			if took > ceiling {
				t.Fatalf("Run returned %v after a stop while %s against a target that does not answer, want at most %v (3 x (drain %v + commit %v))",
					took, name, ceiling, drain, commitAllowance)
			}
			t.Logf("stopped while %s (%d requests swallowed): Run returned %v after the stop (ceiling %v)",
				name, swallowed.Load(), took.Round(time.Millisecond), ceiling)
		})
	}
}
