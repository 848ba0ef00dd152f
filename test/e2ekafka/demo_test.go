//go:build kafka

package e2ekafka

import (
	"bytes"
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/demo"
)

// TestDemoOnRealKafka plays the demo's main scene (topic sync, a partition expansion,
// kill -9 and restart, an application group moved to the target, the audit) on two
// single-broker Apache Kafka clusters, as `kafka-mirror demo --kafka real` does: the
// report must pass (0 lost, filter exact, order and partitions kept) and the restarted
// engine, a static group member, must get its partitions back before a dynamic member's
// session would have timed out.
func TestDemoOnRealKafka(t *testing.T) {
	bin := engineBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var out bytes.Buffer
	res, err := demo.Run(ctx, demo.Options{
		Records:   10_000,
		Rate:      demo.DefaultRate,
		RealKafka: true,
		Engine:    func(args ...string) *exec.Cmd { return exec.Command(bin, args...) },
		Out:       &out,
		WorkDir:   t.TempDir(),
	})
	t.Log(out.String())
	if err != nil {
		t.Fatalf("the demo could not finish: %v", err)
	}
	if err := res.Err(); err != nil {
		t.Fatalf("the demo's audit failed: %v", err)
	}
	for _, want := range []string{"Apache Kafka", "The restarted engine is mirroring again", "PASSED"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the demo's output does not say %q", want)
		}
	}
}
