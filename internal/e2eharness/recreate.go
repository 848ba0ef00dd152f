package e2eharness

import (
	"context"
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/audit"
)

// ReadUntil reads topics on the cluster at addrs (read_committed with committed) until
// it holds every record of p, and returns what it read; it fails t if that does not
// happen within timeout.
func ReadUntil(t *testing.T, addrs, topics []string, committed bool, p *audit.Produced, timeout time.Duration) *audit.Mirrored {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	r := audit.NewReader(addrs, topics)
	r.ReadCommitted = committed
	for {
		err := r.Poll(ctx)
		rep := audit.Audit(p, r.Mirrored(), audit.Options{})
		if err == nil && rep.Total.Lost == 0 {
			return r.Mirrored()
		}
		if err == nil {
			err = ctx.Err()
		}
		if err != nil {
			t.Fatalf("the target never held every record: %v\n%s", err, rep)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// AuditIncarnations audits the records written before and after a source topic was
// deleted and created again, each set on its own: the offsets of the two incarnations
// overlap, so each counts the other's records as unknown. It fails t for any record of
// either lost, duplicated, out of order, altered or in the wrong partition, and returns
// the totals.
func AuditIncarnations(t *testing.T, m *audit.Mirrored, before, after *audit.Produced) (lost, dups, order int) {
	t.Helper()
	for phase, p := range map[string]*audit.Produced{"before": before, "after": after} {
		rep := audit.Audit(p, m, audit.Options{})
		lost, dups, order = lost+rep.Total.Lost, dups+rep.Total.Duplicated, order+rep.Total.OutOfOrder
		if rep.Total.Lost != 0 || rep.Total.Duplicated != 0 || rep.Total.OutOfOrder != 0 || rep.Total.Altered != 0 || rep.Total.WrongPartition != 0 {
			t.Errorf("records written %s the re-creation:\n%s", phase, rep)
		}
	}
	return lost, dups, order
}
