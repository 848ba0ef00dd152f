package mirror

import (
	"context"
	"errors"
	"fmt"
	"strconv"
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

// TestLagSeriesFromAssignment checks that an assigned partition has its committed
// offset and lag series from the assignment on, also when it starts at initialOffset
// (no group offset) and never gets a record: an empty partition, and with latest a
// partition whose older records are not mirrored. Before, both series were absent
// until the partition's first commit, so "lag is 0 for every partition" (the failover
// runbook) could not be checked for them.
func TestLagSeriesFromAssignment(t *testing.T) {
	const partitions, before = 3, 20
	tests := map[string]struct {
		initial config.InitialOffset
		// want is the committed offset (and the lag 0) expected per partition.
		want map[int32]int64
	}{
		// Partition 0 is mirrored; partitions 1 and 2 stay empty.
		"oldest": {initial: config.InitialOffsetOldest, want: map[int32]int64{0: before, 1: 0, 2: 0}},
		// Partition 0's records were written before the start: never mirrored.
		"latest": {initial: config.InitialOffsetLatest, want: map[int32]int64{0: before, 1: 0, 2: 0}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := newClusters(t, partitions)
			newWorkload(partitions).produceTo(t, c.source, 0, before)
			cfg := c.testConfig(t, func(cfg *config.Config) { cfg.InitialOffset = tc.initial; cfg.Streams = 1 })
			r := startEngine(t, cfg, testLogger(t))
			series := func(name string) map[int32]float64 {
				families, err := r.e.gatherer.Gather()
				if err != nil {
					t.Fatal(err)
				}
				out := map[int32]float64{}
				for _, f := range families {
					if f.GetName() != name {
						continue
					}
					for _, m := range f.GetMetric() {
						for _, l := range m.GetLabel() {
							if l.GetName() == "partition" {
								p, _ := strconv.Atoi(l.GetValue())
								out[int32(p)] = m.GetGauge().GetValue()
							}
						}
					}
				}
				return out
			}
			testutil.WaitFor(t, 60*time.Second, "every partition assigned and partition 0 caught up", func() bool {
				assigned := 0
				for _, p := range r.e.Stats().Partitions {
					if p.Assigned {
						assigned++
					}
				}
				return assigned == partitions && (tc.initial == config.InitialOffsetLatest || r.e.Stats().Records == before)
			})
			testutil.Eventually(t, 30*time.Second, func() error {
				committed, lag := series(metricCommitted), series(metricLag)
				for p := int32(0); p < partitions; p++ {
					c, okC := committed[p]
					l, okL := lag[p]
					if !okC || !okL || int64(c) != tc.want[p] || l != 0 {
						return fmt.Errorf("partition %d: %s = %v (present %v), %s = %v (present %v); want %d and 0",
							p, metricCommitted, c, okC, metricLag, l, okL, tc.want[p])
					}
				}
				return nil
			})
			if s := r.e.Stats(); s.Lag != 0 {
				t.Errorf("Stats().Lag = %d, want 0", s.Lag)
			}
			if err := r.stop(t); err != nil {
				t.Fatal(err)
			}
		})
	}
}
