package cli

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/go-logr/logr/testr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// runbookCommands returns the `kafka-mirror offsets` command lines of docs/failover.md's
// shell blocks, in order.
func runbookCommands(t *testing.T) [][]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "failover.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	inSh := false
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "```sh"):
			inSh = true
		case strings.HasPrefix(line, "```"):
			inSh = false
		case inSh && strings.HasPrefix(line, "kafka-mirror offsets "):
			out = append(out, strings.Fields(line))
		}
	}
	return out
}

// TestFailoverRunbookCommands runs the `kafka-mirror offsets translate` commands of
// docs/failover.md, in order, against a mirror with a 25% filter: the first prints the
// exact translation and commits nothing, the second commits it to the target group.
func TestFailoverRunbookCommands(t *testing.T) {
	const (
		group        = "orders-app"
		partitions   = 2
		perPartition = 100
		appReads     = 70
	)
	cmds := runbookCommands(t)
	if len(cmds) != 2 || slicesIndex(cmds[1], "--commit") < 0 || slicesIndex(cmds[0], "--commit") >= 0 {
		t.Fatalf("docs/failover.md's offsets commands are %q: want a translate, then a translate --commit", cmds)
	}
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

	// Every 4th record of a partition is dropped by the mirror's filter.
	prod, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for p := int32(0); p < partitions; p++ {
		for i := 0; i < perPartition; i++ {
			r := &kgo.Record{Topic: "orders", Partition: p, Value: []byte(strconv.Itoa(i))}
			if i%4 == 0 {
				r.Headers = []kgo.RecordHeader{{Key: "skip", Value: []byte("1")}}
			}
			recs = append(recs, r)
		}
	}
	if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	prod.Close()

	// The application reads part of the topic and commits.
	app, err := kgo.NewClient(kgo.SeedBrokers(src.ListenAddrs()...), kgo.ConsumerGroup(group), kgo.ConsumeTopics("orders"),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	read := 0
	for read < appReads {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		read += len(app.PollRecords(ctx, 9).Records())
		cancel()
	}
	if err := app.CommitUncommittedOffsets(context.Background()); err != nil {
		t.Fatal(err)
	}
	app.Close()
	appOffsets := testutil.CommittedOffsets(t, src.ListenAddrs(), group, "orders", partitions)

	cfgPath := filepath.Join(t.TempDir(), "mirror.yaml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(`apiVersion: kafkamirror.io/v1alpha1
kind: MirrorConfig
source: {bootstrapServers: [%q]}
target: {bootstrapServers: [%q]}
consumerGroup: runbook-mirror
topics: {include: ["orders"]}
handlers: [{cel: {filter: "!('skip' in record.headers)"}}]
groups: {include: ["orders-.*"], syncInterval: 1h}
offsetCommitInterval: 300ms
metrics: {address: "0"}
`, src.ListenAddrs()[0], tgt.ListenAddrs()[0])), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	e, err := mirror.New(cfg, mirror.WithLogger(testr.New(t)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	passing := partitions * perPartition * 3 / 4
	testutil.WaitFor(t, time.Minute, "the mirror to write every passing record", func() bool { return e.Stats().Records == int64(passing) })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// The target holds the passing records in order, so the exact translation of a
	// source offset is the number of passing records below it.
	want := map[int32]int64{}
	committedParts := 0
	for p, off := range appOffsets {
		if off < 0 {
			want[p] = -1 // no commit on the source, nothing to translate
			continue
		}
		committedParts++
		for i := int64(0); i < off; i++ {
			if i%4 != 0 {
				want[p]++
			}
		}
	}
	for n, args := range cmds {
		for i, a := range args {
			if a == "mirror.yaml" {
				args[i] = cfgPath
			}
		}
		root := NewRootCommand()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(args[1:])
		if err := root.ExecuteContext(context.Background()); err != nil {
			t.Fatalf("%q: %v\n%s", strings.Join(args, " "), err, out.String())
		}
		t.Logf("%s\n%s", strings.Join(args, " "), out.String())
		commit := n == 1
		rows := 0
		for _, line := range strings.Split(out.String(), "\n") {
			f := strings.Fields(line)
			if len(f) < 8 || f[0] != "orders" {
				continue
			}
			rows++
			p, _ := strconv.Atoi(f[1])
			wantRow := []string{"orders", f[1], strconv.FormatInt(appOffsets[int32(p)], 10), "orders", strconv.FormatInt(want[int32(p)], 10),
				strconv.FormatInt(int64(passing/partitions)-want[int32(p)], 10), "true", "-"}
			if commit {
				wantRow = append(wantRow, "committed")
			}
			got := strings.Join(f, " ")
			if appOffsets[int32(p)] < 0 {
				// A partition the group never committed has a row saying what the
				// target group does there, and is never committed.
				wantRow = []string{"orders", f[1], "-", "orders", "-", "-", "-", "-"}
				if commit {
					wantRow = append(wantRow, "skipped:", "the", "source", "group", "has", "no", "committed", "offset")
				}
				wantRow = append(wantRow, "no", "source", "offset,", "no", "target", "offset:", "consumers", "start", "at", "their", "auto.offset.reset",
					"(earliest", "0,", "latest", strconv.Itoa(passing/partitions)+")")
			}
			if got != strings.Join(wantRow, " ") {
				t.Errorf("row %q, want %q", got, strings.Join(wantRow, " "))
			}
		}
		if rows != partitions || committedParts == 0 {
			t.Fatalf("%d partition rows, want one per mirrored partition, %d (the source group committed %v)", rows, partitions, appOffsets)
		}
		got := map[int32]int64{0: -1, 1: -1}
		if commit {
			got = testutil.CommittedOffsets(t, tgt.ListenAddrs(), group, "orders", partitions)
		} else if groupExists(t, tgt, group) {
			t.Fatalf("%q created group %q on the target without --commit", strings.Join(args, " "), group)
		}
		for p := int32(0); p < partitions; p++ {
			if commit && got[p] != want[p] || !commit && got[p] != -1 {
				t.Fatalf("after %q the target group holds %v, want %v (commit %v)", strings.Join(args, " "), got, want, commit)
			}
		}
	}
}

// groupExists reports whether cl knows group (a commit creates it).
func groupExists(t *testing.T, cl *kfake.Cluster, group string) bool {
	t.Helper()
	sc := sarama.NewConfig()
	sc.Version = sarama.V3_6_0_0
	admin, err := sarama.NewClusterAdmin(cl.ListenAddrs(), sc)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	groups, err := admin.ListConsumerGroups()
	if err != nil {
		t.Fatal(err)
	}
	_, ok := groups[group]
	return ok
}

func slicesIndex(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}
