package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
)

// TestRunCommandMirrorsAndStopsOnSIGTERM runs `kafka-mirror run` as a process between
// two kfake clusters, sends SIGTERM once the records arrived, and checks the clean exit
// and that every source offset was committed.
func TestRunCommandMirrorsAndStopsOnSIGTERM(t *testing.T) {
	const records = 2000
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "orders.eu"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	tgt, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	defer tgt.Close()

	prod, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := 0; i < records; i++ {
		recs = append(recs, &kgo.Record{Topic: "orders.eu", Key: []byte(fmt.Sprint(i)), Value: []byte("v")})
	}
	if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	prod.Close()

	cfgPath := filepath.Join(t.TempDir(), "mirror.yaml")
	cfg := fmt.Sprintf(`apiVersion: kafkamirror.io/v1alpha1
kind: MirrorConfig
source: {bootstrapServers: [%q]}
target: {bootstrapServers: [%q]}
consumerGroup: run-test
topics: {include: ["orders\\..*"]}
streams: 2
offsetCommitInterval: 500ms
`, src.ListenAddrs()[0], tgt.ListenAddrs()[0])
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := kafkaMirror("run", "--config", cfgPath, "--metrics-address", "127.0.0.1:0", "--log-format", "json")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()

	cons, err := kgo.NewClient(kgo.SeedBrokers(tgt.ListenAddrs()...), kgo.ConsumeTopics("orders.eu"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.MetadataMaxAge(time.Second), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	got := 0
	deadline := time.Now().Add(2 * time.Minute)
	for got < records && time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		got += cons.PollFetches(ctx).NumRecords()
		cancel()
	}
	if got != records {
		t.Fatalf("target holds %d records, want %d; stderr:\n%s", got, records, stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("kafka-mirror run exited with %v after SIGTERM; stderr:\n%s", err, stderr.String())
	}
	for _, want := range []string{"Starting the mirror", `source [` + src.ListenAddrs()[0] + `] -> target [`, "Stopped the mirror cleanly"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("log lacks %q:\n%s", want, stderr.String())
		}
	}

	sc := sarama.NewConfig()
	sc.Version = sarama.V3_6_0_0
	admin, err := sarama.NewClusterAdmin(src.ListenAddrs(), sc)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	offs, err := admin.ListConsumerGroupOffsets("run-test", map[string][]int32{"orders.eu": {0, 1, 2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	var committed int64
	for p := int32(0); p < 4; p++ {
		committed += offs.GetBlock("orders.eu", p).Offset
	}
	if committed != records {
		t.Fatalf("committed offsets add up to %d, want %d", committed, records)
	}
}

// TestRunCommandErrors checks that run fails with one line naming the cause.
func TestRunCommandErrors(t *testing.T) {
	dir := t.TempDir()
	unreachable := filepath.Join(dir, "unreachable.yaml")
	if err := os.WriteFile(unreachable, []byte(`apiVersion: kafkamirror.io/v1alpha1
kind: MirrorConfig
source: {bootstrapServers: ["127.0.0.1:1"]}
target: {bootstrapServers: ["127.0.0.1:2"]}
consumerGroup: g
topics: {include: ["a"]}
metrics: {address: "0"}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	badCEL := filepath.Join(dir, "bad-cel.yaml")
	if err := os.WriteFile(badCEL, []byte(`apiVersion: kafkamirror.io/v1alpha1
kind: MirrorConfig
source: {bootstrapServers: ["127.0.0.1:1"]}
target: {bootstrapServers: ["127.0.0.1:2"]}
consumerGroup: g
topics: {include: ["a"]}
handlers: [{cel: {filter: "record.nope +"}}]
`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		args []string
		want string
	}{
		"no config flag":      {[]string{"run"}, "--config is required"},
		"missing file":        {[]string{"run", "--config", filepath.Join(dir, "nope.yaml")}, "while reading the mirror config"},
		"invalid handler":     {[]string{"run", "--config", badCEL}, "handlers[0].cel.filter"},
		"bad metrics address": {[]string{"run", "--config", unreachable, "--metrics-address", "nope"}, "metrics.address"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cmd := kafkaMirror(tc.args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			if err == nil {
				t.Fatalf("kafka-mirror %v succeeded", tc.args)
			}
			var errLine string
			for _, l := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
				if strings.HasPrefix(l, "Error: ") {
					errLine = l
				}
			}
			if !strings.Contains(errLine, tc.want) {
				t.Fatalf("error line %q does not contain %q; stderr:\n%s", errLine, tc.want, stderr.String())
			}
		})
	}
}

// TestRunCommandRetriesAnUnreachableCluster checks that run keeps trying a cluster it
// cannot reach, logging the cluster and the cause, and still stops cleanly on SIGTERM.
// (The engine retries every connection failure so that a corrected Secret is picked up
// without a restart.)
func TestRunCommandRetriesAnUnreachableCluster(t *testing.T) {
	path := filepath.Join(t.TempDir(), "unreachable.yaml")
	if err := os.WriteFile(path, []byte(`apiVersion: kafkamirror.io/v1alpha1
kind: MirrorConfig
source: {bootstrapServers: ["127.0.0.1:1"]}
target: {bootstrapServers: ["127.0.0.1:2"]}
consumerGroup: g
topics: {include: ["a"]}
metrics: {address: "0"}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := kafkaMirror("run", "--config", path)
	var stderr testutil.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	const want = "while connecting to the source cluster [127.0.0.1:1]"
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(stderr.String(), want) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(stderr.String(), want) {
		t.Fatalf("after a minute the log does not contain %q:\n%s", want, stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run exited with %v after SIGTERM; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("run did not stop within 30s of SIGTERM; stderr:\n%s", stderr.String())
	}
}
