package demo

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestCount(t *testing.T) {
	tests := map[string]struct {
		n    int64
		want string
	}{
		"zero":      {0, "0"},
		"hundreds":  {999, "999"},
		"thousands": {1000, "1,000"},
		"millions":  {1234567, "1,234,567"},
		"negative":  {-12345, "-12,345"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := count(tc.n); got != tc.want {
				t.Fatalf("count(%d) = %q, want %q", tc.n, got, tc.want)
			}
		})
	}
}

func TestViewPlainPrintsOneLinePerFrame(t *testing.T) {
	var out bytes.Buffer
	v := newView(&out, false, 0, time.Now())
	frame := progress{
		Elapsed: 2 * time.Second, Produced: 1500, ToProduce: 3000, Engine: "running", PID: 42,
		RecordsPerSec: 600, BytesPerSec: 64000, InFlight: 3, Commits: 2, Filtered: 150,
		Topics: []topicState{{Source: "orders.eu", Lag: 12}, {Source: "payments", Lag: 0}},
	}
	v.show(frame)
	v.show(frame)
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	want := "[  2.0s] progress: engine=running produced=1500/3000 rec/s=600 bytes/s=64000 inflight=3 commits=2 filtered=150 lag: orders.eu=12 payments=0"
	if len(lines) != 2 || lines[0] != want || lines[1] != want {
		t.Fatalf("plain output:\n%s\nwant twice:\n%s", out.String(), want)
	}
	if strings.Contains(out.String(), "\x1b[") {
		t.Errorf("plain output contains terminal escapes: %q", out.String())
	}
}

func TestViewTTYRedrawsInPlace(t *testing.T) {
	var out bytes.Buffer
	v := newView(&out, true, 40, time.Now())
	frame := progress{Engine: "running", Topics: []topicState{{Source: "orders.eu", SourcePartitions: 6, TargetPartitions: 6}}}
	v.show(frame)
	first := out.Len()
	v.event("something happened")
	v.show(frame)
	rest := out.String()[first:]
	// The 5-line block is erased (cursor up 5, clear) before the event and again
	// before the next frame, then drawn below the event.
	if got := strings.Count(rest, "\x1b[5A\r\x1b[J"); got != 2 {
		t.Errorf("the block was erased %d times, want 2:\n%q", got, rest)
	}
	if !strings.Contains(rest, "] something happened\n") {
		t.Errorf("the event is missing:\n%q", rest)
	}
	for _, l := range strings.Split(rest, "\n") {
		if l = strings.TrimPrefix(l, "\x1b[5A\r\x1b[J"); len([]rune(l)) >= 40 {
			t.Errorf("a block line is as wide as the 40-column terminal and would wrap: %q", l)
		}
	}
}

func TestParseMetrics(t *testing.T) {
	exposition := `# HELP kafka_mirror_records_total Records written to the target and acked, by source partition.
# TYPE kafka_mirror_records_total counter
kafka_mirror_records_total{partition="0",topic="orders.eu"} 10
kafka_mirror_records_total{partition="1",topic="orders.eu"} 5
# TYPE kafka_mirror_bytes_total counter
kafka_mirror_bytes_total{partition="0",topic="orders.eu"} 1000
# TYPE kafka_mirror_filtered_records_total counter
kafka_mirror_filtered_records_total{partition="0",topic="orders.eu"} 2
# TYPE kafka_mirror_inflight_records gauge
kafka_mirror_inflight_records{partition="0",topic="orders.eu"} 3
kafka_mirror_inflight_records{partition="1",topic="orders.eu"} 4
# TYPE kafka_mirror_commits_total counter
kafka_mirror_commits_total 7
`
	got, err := parseMetrics(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	want := engineMetrics{Records: 15, Bytes: 1000, Filtered: 2, InFlight: 7, Commits: 7}
	if got != want {
		t.Fatalf("parseMetrics() = %+v, want %+v", got, want)
	}
}
