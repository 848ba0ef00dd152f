package main

import (
	"math"
	"strings"
	"testing"
)

// A shortened `go tool pprof -traces` output: leaf first, the goroutine's root last.
const tracesSample = `File: bench
Type: cpu
Duration: 4.88s, Total samples = 0.75s (15.37%)
-----------+-------------------------------------------------------
     200ms   runtime.memmove
             github.com/IBM/sarama.(*produceSet).add
             github.com/IBM/sarama.(*brokerProducer).run
             github.com/IBM/sarama.withRecover
-----------+-------------------------------------------------------
     100ms   sync.(*Mutex).Lock (inline)
             github.com/kafka-mirror/kafka-mirror-operator/mirror/offsets.(*Tracker).Ack
             github.com/kafka-mirror/kafka-mirror-operator/mirror.(*sender).acked
             github.com/kafka-mirror/kafka-mirror-operator/mirror.(*sender).readAcks
             github.com/kafka-mirror/kafka-mirror-operator/mirror.(*sender).readAllAcks
-----------+-------------------------------------------------------
      50ms   runtime.chansend1
             main.forwardHandler.ConsumeClaim
             github.com/IBM/sarama.(*consumerGroupSession).consume
-----------+-------------------------------------------------------
     300ms   runtime.scanobject
             runtime.gcDrain
             runtime.gcBgMarkWorker
-----------+-------------------------------------------------------
      10ms   runtime.futex
             runtime.findRunnable
             runtime.schedule
             runtime.mcall
-----------+-------------------------------------------------------
      90ms   crypto/sha256.block
             main.somethingElse
-----------+-------------------------------------------------------
`

func TestParseTraces(t *testing.T) {
	b, err := parseTraces(strings.NewReader(tracesSample))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"sarama producer: batching, encoding, sending, results":                                               0.2,
		"ack reader: producer results (engine: tracker, budgets, metrics; forwarder: drain)":                  0.1,
		"consume loop: record -> producer input (engine: claim read loop, tracker, budgets; forwarder: copy)": 0.05,
		"garbage collector (background mark, sweep, scavenge)":                                                0.3,
		"Go runtime: scheduler, timers, other":                                                                0.01,
		otherClass:                                                                                            0.09,
	}
	for name, s := range want {
		if math.Abs(b.Seconds[name]-s) > 1e-9 {
			t.Errorf("%s: %.3f s, want %.3f", name, b.Seconds[name], s)
		}
	}
	if len(b.Seconds) != len(want) {
		t.Errorf("classes %v, want exactly %d", b.Seconds, len(want))
	}
	if math.Abs(b.Total-0.75) > 1e-9 {
		t.Errorf("total %.3f s, want 0.75", b.Total)
	}
	if _, err := parseTraces(strings.NewReader("File: x\n")); err == nil {
		t.Error("a profile without samples parsed without an error")
	}
}

func TestBreakdownMarkdown(t *testing.T) {
	e := cpuBreakdown{Total: 1.0, Seconds: map[string]float64{"garbage collector (background mark, sweep, scavenge)": 0.4, otherClass: 0.6}}
	f := cpuBreakdown{Total: 0.5, Seconds: map[string]float64{"garbage collector (background mark, sweep, scavenge)": 0.5}}
	var sb strings.Builder
	breakdownMarkdown(&sb, e, f, 500_000)
	out := sb.String()
	for _, want := range []string{
		"| garbage collector (background mark, sweep, scavenge) | 0.80 | 1.00 | -0.20 |",
		"| other | 1.20 | 0.00 | +1.20 |",
		"| **total (profile samples)** | 2.00 | 1.00 | +1.00 |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("breakdown table lacks %q:\n%s", want, out)
		}
	}
}

// TestClassifyPipelinedProducer: the pipelined producer's goroutine, sarama's request
// encoding and writing included, is its own row, not sarama's producer's.
func TestClassifyPipelinedProducer(t *testing.T) {
	frames := []string{"github.com/IBM/sarama.encode", "github.com/IBM/sarama.(*Broker).AsyncProduce",
		"github.com/kafka-mirror/kafka-mirror-operator/mirror/pipeline.(*Producer).send",
		"github.com/kafka-mirror/kafka-mirror-operator/mirror/pipeline.(*Producer).run"}
	if got := classify(frames); !strings.HasPrefix(got, "pipelined producer") {
		t.Fatalf("classified as %q, want the pipelined producer's row", got)
	}
}
