package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror"
)

// runFailover runs `kafka-mirror failover args...` and returns its output and error.
func runFailover(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := NewRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(io.Discard)
	root.SetArgs(append([]string{"failover", "--log-level", "error"}, args...))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

// TestFailoverCommand runs `kafka-mirror failover` on a mirror that never ran: planned
// with the table (everything mirrored, 0 left behind, the group's exact checkpoint), then
// immediate with the source unreachable as JSON, and checks the refusals of bad flags.
func TestFailoverCommand(t *testing.T) {
	const partitions, perPartition = 2, 40
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	tgt, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()
	prod, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for p := int32(0); p < partitions; p++ {
		for i := 0; i < perPartition; i++ {
			recs = append(recs, &kgo.Record{Topic: "orders", Partition: p, Value: []byte(fmt.Sprint(i))})
		}
	}
	if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	prod.Close()
	// The application read everything and committed.
	app, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...), kgo.ConsumerGroup("orders-app"), kgo.ConsumeTopics("orders"),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for read := 0; read < partitions*perPartition; {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		read += len(app.PollFetches(ctx).Records())
		cancel()
	}
	if err := app.CommitUncommittedOffsets(context.Background()); err != nil {
		t.Fatal(err)
	}
	app.Close()

	writeConfig := func(source string) string {
		path := filepath.Join(t.TempDir(), "mirror.yaml")
		if err := os.WriteFile(path, []byte(fmt.Sprintf(`apiVersion: kafkamirror.io/v1alpha1
kind: MirrorConfig
source: {bootstrapServers: [%q]}
target: {bootstrapServers: [%q]}
consumerGroup: cli-failover
topics: {include: ["orders"]}
groups: {include: ["orders-.*"]}
offsetCommitInterval: 300ms
metrics: {address: "0"}
`, source, tgt.ListenAddrs()[0])), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	cfgPath := writeConfig(src.ListenAddrs()[0])

	out, err := runFailover(t, "--config", cfgPath, "--mode", "planned", "--timeout", "90s")
	if err != nil {
		t.Fatalf("planned failover failed: %v\n%s", err, out)
	}
	t.Logf("planned failover:\n%s", out)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^planned failover of mirror "cli-failover": completed$`),
		regexp.MustCompile(`(?m)^cutover at \S+$`),
		regexp.MustCompile(`(?m)^TOPIC +PARTITION +SOURCE-END +COMMITTED +LAST-MIRRORED +AT-TARGET-OFFSET +LEFT-BEHIND +TARGET-TOPIC +TARGET-END \(FAILBACK\)$`),
		regexp.MustCompile(`(?m)^orders +0 +40 +40 +39 +39 +0 +orders +40$`),
		regexp.MustCompile(`(?m)^orders +1 +40 +40 +39 +39 +0 +orders +40$`),
		regexp.MustCompile(`(?m)^GROUP +TOPIC +PARTITION +SOURCE-OFFSET +TARGET-OFFSET +EXACT +RESULT$`),
		regexp.MustCompile(`(?m)^orders-app +orders +0 +40 +40 +true +committed$`),
		regexp.MustCompile(`(?m)^orders-app +orders +1 +40 +40 +true +committed$`),
	} {
		if !want.MatchString(out) {
			t.Errorf("the table does not match %s", want)
		}
	}

	// The source is gone: immediate, as JSON.
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := closed.Addr().String()
	_ = closed.Close()
	// As the operator's failover Job runs it: the summary goes to the termination log too.
	termLog := filepath.Join(t.TempDir(), "termination-log")
	out, err = runFailover(t, "--config", writeConfig(gone), "--mode", "immediate", "--timeout", "5s", "-o", "json", "--termination-log", termLog)
	if err != nil {
		t.Fatalf("immediate failover failed: %v\n%s", err, out)
	}
	summaryJSON, err := os.ReadFile(termLog)
	if err != nil {
		t.Fatalf("no termination log: %v", err)
	}
	var summary mirror.FailoverSummary
	if err := json.Unmarshal(summaryJSON, &summary); err != nil {
		t.Fatalf("the termination log is not a JSON summary: %v\n%s", err, summaryJSON)
	}
	if summary.Mode != mirror.FailoverImmediate || !summary.Completed || summary.SourceReachable || summary.Partitions != partitions ||
		summary.LeftBehindUnknown != partitions || len(summary.PartitionDetails) != partitions || len(summaryJSON) > mirror.MaxFailoverSummaryBytes {
		t.Fatalf("termination log summary %s", summaryJSON)
	}
	var report mirror.FailoverReport
	if err := json.Unmarshal([]byte(out), &report); err != nil {
		t.Fatalf("output is not a JSON report: %v\n%s", err, out)
	}
	if report.Mode != mirror.FailoverImmediate || !report.Completed || report.SourceReachable || len(report.Partitions) != partitions {
		t.Fatalf("report %+v", report)
	}
	for _, p := range report.Partitions {
		if p.LeftBehind != nil || p.LeftBehindNote != mirror.UnknownSourceUnreachable || p.SourceEnd != nil ||
			p.LastMirroredOffset != perPartition-1 || p.TargetEnd != perPartition {
			t.Errorf("partition %d: %+v", p.Partition, p)
		}
	}
	if !strings.Contains(out, `"leftBehindNote": "unknown: source unreachable"`) {
		t.Errorf("the JSON does not say the source was unreachable:\n%s", out)
	}
	if len(report.Groups) != 1 || len(report.Groups[0].Partitions) != partitions || !report.Groups[0].Partitions[0].Exact {
		t.Errorf("groups %+v, want orders-app's exact checkpoint", report.Groups)
	}

	// The commands of docs/failover.md, with this test's config, run and complete.
	docs, err := os.ReadFile(filepath.Join("..", "..", "docs", "failover.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := regexp.MustCompile(`(?m)^kafka-mirror failover (.*?)( >.*)?$`).FindAllStringSubmatch(string(docs), -1)
	if len(documented) != 2 {
		t.Fatalf("docs/failover.md has %d kafka-mirror failover commands, want the planned and the immediate one", len(documented))
	}
	for _, m := range documented {
		args := strings.Fields(strings.ReplaceAll(m[1], "mirror.yaml", cfgPath))
		if out, err := runFailover(t, args...); err != nil {
			t.Errorf("kafka-mirror failover %s: %v\n%s", m[1], err, out)
		}
	}

	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"no mode":     {[]string{"--config", cfgPath}, `required flag(s) "mode" not set`},
		"bad mode":    {[]string{"--config", cfgPath, "--mode", "soon"}, `--mode: "soon" is not planned or immediate`},
		"bad output":  {[]string{"--config", cfgPath, "--mode", "planned", "-o", "yaml"}, `-o: "yaml" is not table or json`},
		"no config":   {[]string{"--mode", "planned"}, "--config is required"},
		"bad timeout": {[]string{"--config", cfgPath, "--mode", "planned", "--timeout", "-1s"}, "--timeout: -1s is negative"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := runFailover(t, tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want %q", err, tc.want)
			}
		})
	}
}
