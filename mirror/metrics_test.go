package mirror

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/handler"
)

// failingListener fails every call, as a broken user listener would.
type failingListener struct{}

func (failingListener) OnAssigned(context.Context, []handler.TopicPartition) error {
	return errors.New("the listener is broken")
}

func (failingListener) OnRevoked(context.Context, []handler.TopicPartition) error {
	return errors.New("the listener is broken")
}

func init() {
	handler.RegisterListener("test-failing", func(map[string]string) (handler.RebalanceListener, error) {
		return failingListener{}, nil
	})
}

// TestEngineRegistryMetrics checks what the engine's own registry serves besides the
// mirror's metrics: listener failures counted in kafka_mirror_listener_errors_total,
// and the Go runtime and process metrics a default registry would have had.
func TestEngineRegistryMetrics(t *testing.T) {
	c := newClusters(t, 2)
	cfg := c.testConfig(t, func(cfg *config.Config) { cfg.RebalanceListener = &config.PluginSpec{Name: "test-failing"} })
	r := startEngine(t, cfg, testLogger(t))
	testutil.WaitFor(t, 60*time.Second, "ready", func() bool { return r.e.Ready() == nil })

	families, err := r.e.gatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			switch {
			case m.GetCounter() != nil:
				values[f.GetName()] += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				values[f.GetName()] += m.GetGauge().GetValue()
			default:
				values[f.GetName()]++
			}
		}
	}
	tests := map[string]struct {
		metric string
		min    float64
	}{
		"listener errors counted":  {metric: metricListenerErr, min: 1},
		"go runtime metrics":       {metric: "go_goroutines", min: 1},
		"process metrics":          {metric: "process_resident_memory_bytes", min: 1},
		"mirror metrics still set": {metric: metricRebalances, min: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			v, ok := values[tc.metric]
			if !ok || v < tc.min {
				t.Fatalf("%s = %v (present %v), want at least %v", tc.metric, v, ok, tc.min)
			}
		})
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}
