// Command benchoperator measures the operator at fleet scale: it runs the manager
// in-process against a real kube-apiserver (envtest) and in-process kfake clusters spoken
// to over TCP, creates N KafkaMirrors and reports how long they take to reconcile, what
// the operator does while nothing changes (reconciles, API writes and Kafka connections
// per minute, CPU, RSS) and how fast a spec change is reconciled with and without
// KafkaMirrors on clusters that accept TCP and never answer.
//
//	KUBEBUILDER_ASSETS=$(bash hack/envtest.sh) go run ./hack/benchoperator --mirrors 200
//
// `make bench-operator` runs it (BENCH_OPERATOR_ARGS="--mirrors 1000" for the big run) and
// writes the result into docs/benchmarks/operator.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// options are the benchmark's flags.
type options struct {
	mirrors      int
	hanging      int
	changes      int
	steady       time.Duration
	syncInterval time.Duration
	settle       time.Duration
	out          string
	label        string
	profile      bool
	workers      int
}

func main() {
	var o options
	flag.IntVar(&o.mirrors, "mirrors", 200, "KafkaMirrors on the healthy clusters")
	flag.IntVar(&o.hanging, "hanging", 10, "KafkaMirrors whose source accepts TCP and never answers (one listener each)")
	flag.IntVar(&o.changes, "changes", 20, "KafkaMirrors whose spec is changed to measure spec-change latency")
	flag.DurationVar(&o.steady, "steady", time.Minute, "steady-state window (nothing changes) over which rates are measured")
	flag.DurationVar(&o.syncInterval, "sync-interval", 30*time.Second, "spec.topicSyncInterval of every KafkaMirror (the default is 30s)")
	flag.DurationVar(&o.settle, "settle", 10*time.Second, "wait after the hanging KafkaMirrors are created, before the spec change")
	flag.StringVar(&o.out, "out", "docs/benchmarks/operator.md", "markdown file whose section for this run (by --label) is replaced; empty prints only")
	flag.StringVar(&o.label, "label", "", "section name in --out; default: the number of mirrors")
	flag.BoolVar(&o.profile, "profile", false, "write CPU profiles of the operator process during creation and the steady-state window ("+profileDir+"/operator-{create,steady}-cpu.pprof) and of kube-apiserver over the first 40 s of creation ("+profileDir+"/apiserver-create-cpu.pprof)")
	flag.IntVar(&o.workers, "workers", 0, "the operator's MaxConcurrentReconciles; 0 keeps the operator's default")
	flag.Parse()
	if o.label == "" {
		o.label = fmt.Sprintf("%d mirrors", o.mirrors)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := run(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-operator:", err)
		os.Exit(1)
	}
	md := res.markdown(o)
	fmt.Print(md)
	if o.out != "" {
		if err := writeSection(o.out, o.label, md); err != nil {
			fmt.Fprintln(os.Stderr, "bench-operator:", err)
			os.Exit(1)
		}
	}
}

// writeSection replaces the section between the markers for label in path (or appends
// it), so runs of different sizes live side by side in one file.
func writeSection(path, label, md string) error {
	begin, end := "<!-- bench-operator: "+label+" -->\n", "<!-- end: "+label+" -->\n"
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("while reading %s: %w", path, err)
	}
	s := string(old)
	block := begin + md + end
	if i := strings.Index(s, begin); i >= 0 {
		if j := strings.Index(s[i:], end); j >= 0 {
			s = s[:i] + block + s[i+j+len(end):]
		} else {
			s = s[:i] + block
		}
	} else {
		if s != "" && !strings.HasSuffix(s, "\n\n") {
			s += "\n"
		}
		s += block
	}
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		return fmt.Errorf("while writing %s: %w", path, err)
	}
	return nil
}
