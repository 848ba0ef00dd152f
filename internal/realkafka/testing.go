package realkafka

import (
	"context"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
)

// startTimeout bounds the start of a test's clusters: a broker starts in seconds on a
// quiet machine; six JVMs starting at once on 2 busy cores take far longer.
const startTimeout = 3 * time.Minute

// StartTest starts a cluster under the test's temporary directory, failing the test
// (never skipping it) when the jars are missing or a broker does not start. The cluster
// is killed when the test ends, whether it passed or not, and a failed test's log shows
// the tail of every broker's log.
func StartTest(t testing.TB, opts Options) *Cluster {
	t.Helper()
	return StartTestClusters(t, opts)[0]
}

// StartTestClusters is StartTest for several clusters, started at the same time (a
// JVM's start is mostly waiting).
func StartTestClusters(t testing.TB, opts ...Options) []*Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	dir := t.TempDir()
	out := make([]*Cluster, len(opts))
	var g errgroup.Group
	for i, o := range opts {
		g.Go(func() error {
			c, err := Start(ctx, dir, o)
			if err != nil {
				return err
			}
			out[i] = c
			return nil
		})
	}
	err := g.Wait()
	for _, c := range out {
		if c == nil {
			continue
		}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("broker logs of %s:\n%s", c.Name(), c.LogTails())
			}
			c.Close()
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}
