package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

const translateGroup = "orders-app"

// translateSetup is a source and a target kfake cluster and the config of a mirror
// between them with groups set.
type translateSetup struct {
	src, tgt *kfake.Cluster
	cfgPath  string
	cfg      *config.Config
}

func newTranslateSetup(t *testing.T, partitions int32) *translateSetup {
	t.Helper()
	src, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(partitions, "orders"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(src.Close)
	tgt, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tgt.Close)
	cfgPath := filepath.Join(t.TempDir(), "mirror.yaml")
	if err := os.WriteFile(cfgPath, []byte(fmt.Sprintf(`apiVersion: kafkamirror.io/v1alpha1
kind: MirrorConfig
source: {bootstrapServers: [%q]}
target: {bootstrapServers: [%q]}
consumerGroup: translate-mirror
topics: {include: ["orders"]}
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
	return &translateSetup{src: src, tgt: tgt, cfgPath: cfgPath, cfg: cfg}
}

// produce writes n records to partition p of the source topic.
func (s *translateSetup) produce(t *testing.T, p int32, n int) {
	t.Helper()
	prod, err := kgo.NewClient(kgo.SeedBrokers(s.src.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: "orders", Partition: p, Value: []byte("v")}
	}
	if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// mirror runs the mirror until it wrote records records, then stops it cleanly.
func (s *translateSetup) mirror(t *testing.T, records int64) {
	t.Helper()
	e, err := mirror.New(s.cfg, mirror.WithLogger(testr.New(t)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	testutil.WaitFor(t, time.Minute, fmt.Sprintf("the mirror to write %d records", records), func() bool { return e.Stats().Records == records })
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// translate runs `kafka-mirror offsets translate` (with --commit when commit) and
// returns its output, its rows by partition (the fields after TOPIC and PARTITION) and
// its error.
func (s *translateSetup) translate(t *testing.T, commit bool) (string, map[string]string, error) {
	t.Helper()
	args := []string{"offsets", "translate", "--config", s.cfgPath, "--group", translateGroup}
	if commit {
		args = append(args, "--commit")
	}
	root := NewRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	t.Logf("kafka-mirror %s (error %v)\n%s", strings.Join(args, " "), err, out.String())
	rows := map[string]string{}
	for _, line := range strings.Split(out.String(), "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && f[0] == "orders" {
			rows[f[1]] = strings.Join(f[2:], " ")
		}
	}
	return out.String(), rows, err
}

// TestTranslateGroupAheadOfTheMirror translates a group that committed past what the
// mirror mirrored (the mirror stopped at 100, the group read on to 3,100): the row
// must say "not mirrored that far yet" rather than look caught up (TARGET-OFFSET 100,
// LAG 0), the result must carry it for callers, and --commit must not commit that
// partition (the group would read 3,000 records again once the mirror resumes) but fail
// naming it; once the mirror caught up, the same command commits it exactly.
func TestTranslateGroupAheadOfTheMirror(t *testing.T) {
	s := newTranslateSetup(t, 2)
	s.produce(t, 0, 100)
	s.produce(t, 1, 100)
	s.mirror(t, 200)
	s.produce(t, 0, 3000)
	testutil.CommitOffsets(t, s.src.ListenAddrs(), translateGroup, "orders", map[int32]int64{0: 3100, 1: 60}, "")

	gt, err := mirror.TranslateGroup(context.Background(), s.cfg, translateGroup, false)
	if err != nil {
		t.Fatal(err)
	}
	if un := gt.Unmirrored(); len(un) != 1 || un[0].Partition != 0 {
		t.Errorf("Unmirrored() = %+v, want partition 0 only", un)
	}
	for _, pt := range gt.Partitions {
		wantAhead := pt.Partition == 0
		if pt.AheadOfMirror != wantAhead || pt.MirroredTo != 100 {
			t.Errorf("partition %d: AheadOfMirror %v, MirroredTo %d; want %v and 100", pt.Partition, pt.AheadOfMirror, pt.MirroredTo, wantAhead)
		}
	}

	_, rows, err := s.translate(t, false)
	if err != nil {
		t.Fatalf("translate without --commit: %v", err)
	}
	if r := rows["0"]; !strings.HasPrefix(r, "3100 orders 100 - false") || !strings.Contains(r, "not mirrored that far yet") {
		t.Errorf("row of partition 0 is %q: want source 3100, target 100, LAG -, EXACT false and \"not mirrored that far yet\"", r)
	}
	if r := rows["1"]; !strings.HasPrefix(r, "60 orders 60 40 ") || strings.Contains(r, "not mirrored") {
		t.Errorf("row of partition 1 is %q: want source 60, target 60, LAG 40, mirrored", r)
	}

	out, rows, err := s.translate(t, true)
	if err == nil || !strings.Contains(err.Error(), "not mirrored that far yet") || !strings.Contains(err.Error(), "orders/0") {
		t.Fatalf("translate --commit returned %v: want an error naming orders/0, not mirrored that far yet\n%s", err, out)
	}
	if r := rows["0"]; !strings.Contains(r, "skipped: not mirrored that far yet") {
		t.Errorf("row of partition 0 is %q: want RESULT skipped: not mirrored that far yet", r)
	}
	if r := rows["1"]; !strings.Contains(r, " committed") {
		t.Errorf("row of partition 1 is %q: want it committed", r)
	}
	if got := testutil.CommittedOffsets(t, s.tgt.ListenAddrs(), translateGroup, "orders", 2); got[0] != -1 || got[1] != 60 {
		t.Fatalf("the target group holds %v after translate --commit, want partition 0 uncommitted and partition 1 at 60", got)
	}

	// The remedy the error names: let the mirror catch up, then commit again.
	s.mirror(t, 3000)
	if _, rows, err = s.translate(t, true); err != nil {
		t.Fatalf("translate --commit after the mirror caught up: %v", err)
	}
	if r := rows["0"]; !strings.HasPrefix(r, "3100 orders 3100 0 true") || strings.Contains(r, "not mirrored") {
		t.Errorf("row of partition 0 is %q after the mirror caught up: want 3100 -> 3100, exact, committed", r)
	}
	if got := testutil.CommittedOffsets(t, s.tgt.ListenAddrs(), translateGroup, "orders", 2); got[0] != 3100 || got[1] != 60 {
		t.Fatalf("the target group holds %v, want 3100 and 60", got)
	}
}

// TestTranslateListsPartitionsTheGroupNeverCommitted checks that translate prints every
// mirrored partition, as its help says: a partition the source group never committed
// gets a row that says what the target group does there (resume at its own committed
// offset, or start at its consumers' auto.offset.reset), and --commit leaves it alone.
func TestTranslateListsPartitionsTheGroupNeverCommitted(t *testing.T) {
	s := newTranslateSetup(t, 3)
	s.produce(t, 0, 50)
	s.produce(t, 1, 50)
	s.mirror(t, 100) // partition 2 stays empty
	testutil.CommitOffsets(t, s.src.ListenAddrs(), translateGroup, "orders", map[int32]int64{0: 20}, "")
	testutil.CommitOffsets(t, s.tgt.ListenAddrs(), translateGroup, "orders", map[int32]int64{1: 7}, "")

	for _, commit := range []bool{false, true} {
		_, rows, err := s.translate(t, commit)
		if err != nil {
			t.Fatalf("translate (commit %v): %v", commit, err)
		}
		if len(rows) != 3 {
			t.Errorf("%d partition rows, want 3 (every mirrored partition)", len(rows))
		}
		if r := rows["0"]; !strings.HasPrefix(r, "20 orders 20 30 ") {
			t.Errorf("row of partition 0 is %q, want 20 -> 20, LAG 30", r)
		}
		if r := rows["1"]; !strings.HasPrefix(r, "- orders - - - 7") || !strings.Contains(r, "resumes at its committed offset 7") {
			t.Errorf("row of partition 1 is %q: want no source offset, TARGET-COMMITTED 7, and that the target group resumes at 7", r)
		}
		if r := rows["2"]; !strings.HasPrefix(r, "- orders - - - -") || !strings.Contains(r, "auto.offset.reset (earliest 0, latest 0)") {
			t.Errorf("row of partition 2 is %q: want no offsets, and that consumers start at their auto.offset.reset (earliest 0, latest 0)", r)
		}
		if commit {
			for _, p := range []string{"1", "2"} {
				if r := rows[p]; !strings.Contains(r, "skipped: the source group has no committed offset") {
					t.Errorf("row of partition %s is %q: want RESULT skipped: the source group has no committed offset", p, r)
				}
			}
		}
	}
	if got := testutil.CommittedOffsets(t, s.tgt.ListenAddrs(), translateGroup, "orders", 3); got[0] != 20 || got[1] != 7 || got[2] != -1 {
		t.Fatalf("the target group holds %v, want 20, 7 (its own) and none", got)
	}
}
