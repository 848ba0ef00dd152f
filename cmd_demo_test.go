package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/audit"
	"github.com/kafka-mirror/kafka-mirror-operator/internal/demo"
)

// actAsKafkaMirror makes this test binary behave as the kafka-mirror binary. The demo
// runs the engine by re-executing its own binary (`run --config ...`); under `go test`
// that binary is this one, so it must answer the CLI's arguments as main does.
const actAsKafkaMirror = "KAFKA_MIRROR_TEST_ACT_AS_MAIN"

// init runs before the testing package parses its flags, so the CLI arguments reach
// main untouched and no test runs in the child.
func init() {
	if os.Getenv(actAsKafkaMirror) == "1" {
		main()
		os.Exit(0)
	}
}

// kafkaMirror runs this test binary as `kafka-mirror args...`.
func kafkaMirror(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), actAsKafkaMirror+"=1")
	return cmd
}

// TestDemo runs the whole quick start with small numbers, the way `make demo` does, and
// checks the exit code and the verification report it prints; with --exactly-once the
// report, read read_committed, must show 0 duplicates after the kill.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two embedded clusters and the engine for about 20 seconds")
	}
	for name, tc := range map[string]struct {
		args []string
		want []string
	}{
		"at least once": {want: []string{"PASSED: nothing lost"}},
		"exactly once": {args: []string{"--exactly-once"}, want: []string{
			"delivery exactlyOnce: records and source offsets in one target transaction per source partition every 100ms",
			"fences the killed engine and aborts its open transactions",
			"extra copies after 1 kill -9, read read_committed (delivery exactlyOnce)",
			"PASSED: nothing lost, nothing duplicated (read_committed, delivery exactlyOnce)",
		}},
	} {
		t.Run(name, func(t *testing.T) { testDemo(t, tc.args, tc.want) })
	}
}

// runDemo runs `kafka-mirror args...` (a demo scene) with its own TMPDIR, fails t unless
// it exits 0 within 3 minutes and leaves nothing in TMPDIR (a scene that passed removes
// its work directory), logs its output as what, and returns it.
func runDemo(t *testing.T, what string, args ...string) string {
	t.Helper()
	cmd := kafkaMirror(args...)
	// The demo keeps its config and engine log in a new directory under TMPDIR, and
	// removes it when it passed.
	tmp := t.TempDir()
	cmd.Env = append(cmd.Env, "TMPDIR="+tmp)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the demo: %v", err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the demo failed (%v) after %s:\n%s", err, time.Since(start).Round(time.Second), out.String())
		}
	case <-time.After(3 * time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("the demo did not finish in 3 minutes:\n%s", out.String())
	}
	text := out.String()
	t.Logf("%s took %s:\n%s", what, time.Since(start).Round(100*time.Millisecond), text)
	if left, err := os.ReadDir(tmp); err != nil || len(left) > 0 {
		t.Errorf("the demo passed but left %d entries in TMPDIR (%v): its work directory must go", len(left), err)
	}
	return text
}

func testDemo(t *testing.T, args, wantLines []string) {
	const records = 3000
	exactlyOnce := slices.Contains(args, "--exactly-once")
	text := runDemo(t, "the demo", append([]string{"demo", "--records", strconv.Itoa(records), "--rate", "600"}, args...)...)
	checkReportTimeLast(t, text)

	report := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^  (produced|mirrored|filtered|lost|duplicated|out of order) +([0-9,]+)  `).FindAllStringSubmatch(text, -1) {
		n, err := strconv.Atoi(strings.ReplaceAll(m[2], ",", ""))
		if err != nil {
			t.Fatalf("report line %q: %v", m[0], err)
		}
		report[m[1]] = n
	}
	if report["produced"] != records {
		t.Errorf("produced = %d, want %d", report["produced"], records)
	}
	if report["lost"] != 0 {
		t.Errorf("lost = %d, want 0", report["lost"])
	}
	if report["out of order"] != 0 {
		t.Errorf("out of order = %d, want 0", report["out of order"])
	}
	if _, ok := report["duplicated"]; exactlyOnce && (!ok || report["duplicated"] != 0) {
		t.Errorf("duplicated = %d (reported: %v), want 0 with --exactly-once", report["duplicated"], ok)
	}
	// About a tenth of the records carry the skip header; the filter must drop exactly
	// those, and every other record must be on the target.
	if f := report["filtered"]; f < records/20 || f > records/5 {
		t.Errorf("filtered = %d, want about %d", f, records/10)
	}
	if got, want := report["mirrored"]+report["filtered"], records; got != want {
		t.Errorf("mirrored + filtered = %d, want %d", got, want)
	}
	for _, want := range []string{
		"Killed the engine with SIGKILL",
		"Restarted the engine",
		"Target topic orders.us followed: 5 partitions",
		"in sync  orders.eu 6/6, orders.us 5/5, payments 4/4",
		"orders.tmp.scratch not on the target",
		"The mirror committed group orders-app's translated offsets to the target",
		"(0 skipped)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the demo's output lacks %q", want)
		}
	}
	for _, want := range wantLines {
		if !strings.Contains(text, want) {
			t.Errorf("the demo's output lacks %q", want)
		}
	}
}

// TestDemoActiveActive runs the active-active scene with small numbers: two engines
// mirror one topic between two clusters in both directions, both clusters are written at
// once, and each must hold its own records and its peer's exactly once.
func TestDemoActiveActive(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two embedded clusters and two engines for about 15 seconds")
	}
	const records = 2000 // 1,000 per cluster
	text := runDemo(t, "the active-active demo", "demo", "--active-active", "--records", strconv.Itoa(records), "--rate", "1000")
	checkReportTimeLast(t, text)
	want := map[string]int{"own records": 1000, "own, once": 1000, "own, looped back": 0, "from dc1": 1000, "from dc2": 1000,
		"lost": 0, "duplicated": 0, "out of order": 0, "dropped as looping": 1000}
	seen := map[string]int{}
	for _, m := range regexp.MustCompile(`(?m)^    ([a-z0-9, ]+?) +([0-9,]+)  `).FindAllStringSubmatch(text, -1) {
		n, err := strconv.Atoi(strings.ReplaceAll(m[2], ",", ""))
		if err != nil {
			t.Fatalf("report line %q: %v", m[0], err)
		}
		seen[m[1]]++
		if w, ok := want[m[1]]; ok && n != w {
			t.Errorf("report line %q: %d, want %d", strings.TrimSpace(m[0]), n, w)
		}
	}
	for name := range want {
		if n := seen[name]; n == 0 {
			t.Errorf("the report lacks the line %q", name)
		}
	}
	if !strings.Contains(text, "PASSED: each cluster holds its own records and its peer's, each exactly once; nothing looped.") {
		t.Errorf("the demo's output lacks the PASSED line")
	}
}

func TestDemoRecordCount(t *testing.T) {
	tests := map[string]struct {
		opts       demoOptions
		recordsSet bool
		want       int
		wantErr    string
	}{
		"defaults":              {opts: demoOptions{records: demo.DefaultRecords, rate: demo.DefaultRate}, want: demo.DefaultRecords},
		"records":               {opts: demoOptions{records: 500, rate: 100}, recordsSet: true, want: 500},
		"duration times rate":   {opts: demoOptions{records: demo.DefaultRecords, rate: 2000, duration: time.Minute}, want: 120000},
		"duration needs a rate": {opts: demoOptions{rate: 0, duration: time.Second}, wantErr: "--duration needs a --rate above 0"},
		"negative rate":         {opts: demoOptions{records: 10, rate: -1}, wantErr: "--rate must not be negative"},
		"zero records":          {opts: demoOptions{records: 0, rate: 10}, recordsSet: true, wantErr: "--records must be at least 1"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := tc.opts.recordCount(tc.recordsSet)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("recordCount() = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

func TestDemoRecordsAndDurationExclusive(t *testing.T) {
	root := newRootCommand()
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	root.SetArgs([]string{"demo", "--records", "10", "--duration", "5s"})
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), "none of the others can be") {
		t.Fatalf("demo --records --duration: error = %v, want a mutually exclusive flags error", err)
	}
}

// TestDemoResultErr checks that the demo's exit status follows the audit: a lost
// record, a wrong filter count or a partition mismatch fail it; duplicates do not.
func TestDemoResultErr(t *testing.T) {
	inSync := []demo.TopicResult{{Source: "orders.eu", SourcePartitions: 6, TargetPartitions: 6}}
	good := audit.PartitionReport{Produced: 100, Mirrored: 90, Filtered: 10, Duplicated: 7}
	tests := map[string]struct {
		result  demo.Result
		wantErr string
	}{
		"duplicates are allowed": {result: demo.Result{Audit: audit.Report{Total: good}, Topics: inSync, ExpectedFiltered: 10}},
		"lost": {
			result:  demo.Result{Audit: audit.Report{Total: func() audit.PartitionReport { p := good; p.Lost = 2; return p }(), FirstMissing: []string{"orders.eu/0/a.1"}}, Topics: inSync, ExpectedFiltered: 10},
			wantErr: "2 records lost (first: orders.eu/0/a.1)",
		},
		"filter count": {
			result:  demo.Result{Audit: audit.Report{Total: good}, Topics: inSync, ExpectedFiltered: 11},
			wantErr: "filter dropped 10 records, expected 11",
		},
		"partitions": {
			result:  demo.Result{Audit: audit.Report{Total: good}, Topics: []demo.TopicResult{{Source: "orders.us", SourcePartitions: 5, TargetPartitions: 3}}, ExpectedFiltered: 10},
			wantErr: "topic orders.us has 5 partitions on the source and 3 on the target",
		},
		"failover skipped records": {
			result:  demo.Result{Audit: audit.Report{Total: good}, Topics: inSync, ExpectedFiltered: 10, Failover: &demo.FailoverResult{Expected: 50, Skipped: 3}},
			wantErr: "group orders-app skipped 3 records when it moved to the target",
		},
		"duplicates with exactly-once": {
			result:  demo.Result{Audit: audit.Report{Total: good}, Topics: inSync, ExpectedFiltered: 10, ExactlyOnce: true},
			wantErr: "7 duplicates seen by a read_committed reader with delivery exactlyOnce",
		},
		"failover copies with exactly-once": {
			result: demo.Result{Audit: audit.Report{Total: func() audit.PartitionReport { p := good; p.Duplicated = 0; return p }()}, Topics: inSync,
				ExpectedFiltered: 10, ExactlyOnce: true, Failover: &demo.FailoverResult{Expected: 50, Copies: 2}},
			wantErr: "group orders-app read 2 extra copies on the target with delivery exactlyOnce",
		},
		"out of order": {
			result:  demo.Result{Audit: audit.Report{Total: func() audit.PartitionReport { p := good; p.OutOfOrder = 1; return p }()}, Topics: inSync, ExpectedFiltered: 10},
			wantErr: "1 records out of order",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.result.Err()
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Err() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Err() = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestDemoExitCode checks that a failing command makes the binary exit non-zero, which
// is how `make demo` and CI see a broken promise.
func TestDemoExitCode(t *testing.T) {
	cmd := kafkaMirror("demo", "--rate", "-1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("demo --rate -1: err = %v, want exit code 1; output:\n%s", err, out)
	}
	if !strings.Contains(string(out), "Error: --rate must not be negative, got -1") {
		t.Errorf("demo --rate -1 printed %q", out)
	}
}

// checkReportTimeLast checks that the report's time is not earlier than the stamp of any
// event printed before it: it is the demo's whole time.
// TestDemoFailover runs the failover scene with small numbers: a planned failover with
// an application group, then the failback; both clusters audited, the group moved there
// and back skipping nothing.
func TestDemoFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two embedded clusters and three kafka-mirror processes for about 10 seconds")
	}
	text := runDemo(t, "the failover demo", "demo", "--failover", "--records", "2000", "--rate", "0")
	checkReportTimeLast(t, text)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^    planned failover of mirror "kafka-mirror.demo.a-to-b": completed$`),
		regexp.MustCompile(`(?m)^    orders +0 +250 +250 +failback point +500 +250$`),
		regexp.MustCompile(`(?m)^  on b, each once +2,000  of 2,000 produced on a and b \(lost 0, duplicated 0\)$`),
		regexp.MustCompile(`(?m)^  read by the app on b +1,500  of 1,500 `),
		regexp.MustCompile(`(?m)^  on a after failback, once +2,000  of 2,000 \(lost 0, duplicated 0`),
		regexp.MustCompile(`(?m)^  app group back on a +2,000  summed offsets; a's end is 2,000 `),
		regexp.MustCompile(`(?m)^PASSED: failed over and back`),
	} {
		if !want.MatchString(text) {
			t.Errorf("the demo's output does not match %s", want)
		}
	}
}

func checkReportTimeLast(t *testing.T, text string) {
	t.Helper()
	report := regexp.MustCompile(`(?m)^(?:Verification|Active-active|Failover and failback) report \(([0-9.]+)s\)$`).FindStringSubmatchIndex(text)
	if report == nil {
		t.Fatal("the demo printed no report line with its time")
	}
	total, _ := strconv.ParseFloat(text[report[2]:report[3]], 64)
	for _, m := range regexp.MustCompile(`(?m)^\[ *([0-9.]+)s\]`).FindAllStringSubmatch(text, -1) {
		if stamp, _ := strconv.ParseFloat(m[1], 64); stamp > total {
			t.Errorf("an event is stamped %.1fs, later than the report's %.1fs", stamp, total)
		}
	}
}

func TestDemoKafkaFlag(t *testing.T) {
	for args, want := range map[string]string{
		"demo --kafka docker":               `--kafka "docker": want embedded`,
		"demo --kafka real --active-active": "--kafka real plays the main scene only",
		"demo --kafka real --failover":      "--kafka real plays the main scene only; the failover scene runs on embedded clusters",
	} {
		root := newRootCommand()
		root.SetOut(&bytes.Buffer{})
		root.SetErr(&bytes.Buffer{})
		root.SetArgs(strings.Fields(args))
		if err := root.Execute(); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error = %v, want one containing %q", args, err, want)
		}
	}
}
