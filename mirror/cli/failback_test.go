package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// runCommand runs `kafka-mirror args...` and returns its output and error.
func runCommand(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := NewRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(io.Discard)
	root.SetArgs(append(args, "--log-level", "error"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

// TestFailbackCommand: a planned failover, records written to the source that the
// next (immediate) failover leaves behind, records written to the target; then
// `kafka-mirror failback --plan-only` prints where each partition starts, how many
// records flow back, and the left-behind range; and refuses a config without
// provenance and a --from without a failover record.
func TestFailbackCommand(t *testing.T) {
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "orders"), kfake.ClusterID("cluster-a"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	tgt, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ClusterID("cluster-b"))
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()
	produce := func(cl *kfake.Cluster, counts map[int32]int) {
		t.Helper()
		prod, err := kgo.NewClient(kgo.SeedBrokers(cl.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		if err != nil {
			t.Fatal(err)
		}
		defer prod.Close()
		var recs []*kgo.Record
		for p, n := range counts {
			for i := 0; i < n; i++ {
				recs = append(recs, &kgo.Record{Topic: "orders", Partition: p, Value: []byte(fmt.Sprint(i))})
			}
		}
		if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name, body string) string {
		path := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(path, []byte("apiVersion: kafkamirror.io/v1alpha1\nkind: MirrorConfig\n"+body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	forward := write("mirror.yaml", fmt.Sprintf(`source: {bootstrapServers: [%q]}
target: {bootstrapServers: [%q]}
consumerGroup: cli-forward
topics: {include: ["orders"]}
groups: {include: ["orders-.*"]}
offsetCommitInterval: 300ms
metrics: {address: "0"}
`, src.ListenAddrs()[0], tgt.ListenAddrs()[0]))
	reverseBody := fmt.Sprintf(`source: {bootstrapServers: [%q]}
target: {bootstrapServers: [%q]}
consumerGroup: cli-back
topics: {include: ["orders"]}
offsetCommitInterval: 300ms
metrics: {address: "0"}
`, tgt.ListenAddrs()[0], src.ListenAddrs()[0])
	reverse := write("reverse.yaml", reverseBody+"provenance: {enabled: true}\n")

	produce(src, map[int32]int{0: 40, 1: 40})
	if out, err := runCommand(t, "failover", "--config", forward, "--mode", "planned", "--timeout", "90s"); err != nil {
		t.Fatalf("planned failover failed: %v\n%s", err, out)
	}
	produce(src, map[int32]int{0: 10})
	if out, err := runCommand(t, "failover", "--config", forward, "--mode", "immediate", "--timeout", "10s"); err != nil {
		t.Fatalf("immediate failover failed: %v\n%s", err, out)
	}
	produce(tgt, map[int32]int{0: 7, 1: 3})

	out, err := runCommand(t, "failback", "--config", reverse, "--from", "cli-forward", "--plan-only")
	if err != nil {
		t.Fatalf("failback --plan-only failed: %v\n%s", err, out)
	}
	t.Logf("failback plan:\n%s", out)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^failback mirror "cli-back" from the immediate failover of mirror "cli-forward" \(cutover at \S+\)$`),
		regexp.MustCompile(`(?m)^TOPIC +PARTITION +FAILBACK-POINT +START +START-FROM +END +TO-COPY-BACK$`),
		regexp.MustCompile(`(?m)^orders +0 +40 +40 +failback point +47 +7$`),
		regexp.MustCompile(`(?m)^orders +1 +40 +40 +failback point +43 +3$`),
		regexp.MustCompile(`(?m)^TOPIC +PARTITION +FROM +TO \(EXCLUSIVE\) +RECORDS +NOTE$`),
		regexp.MustCompile(`(?m)^orders +0 +40 +50 +10 +at the cutover$`),
	} {
		if !want.MatchString(out) {
			t.Errorf("the plan does not match %s", want)
		}
	}
	if strings.Contains(out, "orders  1  40  40  0") {
		t.Errorf("partition 1 listed as left behind:\n%s", out)
	}

	// The plan command of docs/failover.md, with this test's config, runs and prints
	// the documented table.
	docs, err := os.ReadFile(filepath.Join("..", "..", "docs", "failover.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := regexp.MustCompile(`(?m)^kafka-mirror failback (.*--plan-only)$`).FindStringSubmatch(string(docs))
	if documented == nil {
		t.Fatal("docs/failover.md has no kafka-mirror failback --plan-only command")
	}
	args := strings.Fields(strings.NewReplacer("reverse.yaml", reverse, "kafka-mirror.default.orders", "cli-forward").Replace(documented[1]))
	if docOut, err := runCommand(t, append([]string{"failback"}, args...)...); err != nil || docOut != out {
		t.Errorf("kafka-mirror failback %s: %v\n%s", documented[1], err, docOut)
	}

	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"without provenance": {[]string{"--config", write("noprov.yaml", reverseBody), "--from", "cli-forward"},
			"initialPositions.fromFailover: Invalid value: \"cli-forward\": a failback needs provenance.enabled: true"},
		"no failover record": {[]string{"--config", reverse, "--from", "nobody", "--plan-only"},
			`initialPositions.fromFailover: "nobody": no failover of mirror "nobody": its progress topic "__kafka-mirror.progress.nobody" does not exist`},
		"no --from": {[]string{"--config", reverse}, "--from is required"},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := runCommand(t, append([]string{"failback"}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q\n%s", err, tc.want, out)
			}
		})
	}
}
