package realkafka

import (
	"context"
	"testing"
	"time"
)

// startTimeout bounds a whole cluster's start in StartTest: a broker starts in seconds
// on a quiet machine; six JVMs starting at once on 2 busy cores take far longer.
const startTimeout = 3 * time.Minute

// StartTest starts a cluster under the test's temporary directory, failing the test
// (never skipping it) when the jars are missing or a broker does not start. The cluster
// is killed when the test ends, whether it passed or not, and a failed test's log shows
// the tail of every broker's log.
func StartTest(t testing.TB, opts Options) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := Start(ctx, t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("broker logs of %s:\n%s", c.Name(), c.LogTails())
		}
		c.Close()
	})
	return c
}
