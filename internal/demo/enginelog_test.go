package demo

import (
	"bytes"
	"testing"
)

func TestStoryLine(t *testing.T) {
	tests := map[string]struct {
		line string
		want string
		ok   bool
	}{
		"story message with fields": {
			line: "2026-12-02T13:59:12.591Z\tINFO\ttopics\ttopics/syncer.go:315\tExpanded target topic\t{\"topic\": \"orders.us\", \"from\": 3, \"to\": 5}",
			want: "engine: Expanded target topic (topic=orders.us from=3 to=5)", ok: true,
		},
		"partition list becomes a count": {
			line: "2026-12-02T13:59:10.592Z\tINFO\tmirror/stream.go:146\tJoined the consumer group\t{\"stream\": 0, \"partitions\": \"a/0,a/1,a/2,b/0\"}",
			want: "engine: Joined the consumer group (stream=0 partitions=4)", ok: true,
		},
		"errors are always told": {
			line: "2026-12-02T13:59:10.592Z\tERROR\tmirror/engine.go:1\tSomething new broke\t{\"error\": \"boom\"}",
			want: "engine: Something new broke (error=boom)", ok: true,
		},
		"large numbers stay whole": {
			line: "t\tINFO\tmain/cmd_run.go:68\tStopped the mirror cleanly\t{\"records\": 90105, \"bytes\": 9444538}",
			want: "engine: Stopped the mirror cleanly (records=90105 bytes=9444538)", ok: true,
		},
		"message without fields": {
			line: "2026-12-02T13:59:10.592Z\tINFO\tmirror/engine.go:1\tStopped the mirror cleanly",
			want: "engine: Stopped the mirror cleanly", ok: true,
		},
		"routine line stays in the file": {
			line: "2026-12-02T13:59:10.588Z\tINFO\tmirror/health.go:43\tServing metrics and health\t{\"address\": \"127.0.0.1:1\"}",
		},
		"not a log line": {line: "panic: something"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := storyLine(tc.line)
			if ok != tc.ok || got != tc.want {
				t.Fatalf("storyLine() = %q, %t; want %q, %t", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestLogTapSplitsLinesAcrossWrites(t *testing.T) {
	var file bytes.Buffer
	var told []string
	tap := &logTap{file: &file, tell: func(s string) { told = append(told, s) }}
	input := "t\tINFO\tc.go:1\tStopped the mirror cleanly\n" +
		"t\tINFO\tc.go:1\tServing metrics and health\t{}\n" +
		"t\tINFO\tc.go:1\tReleased partitions\t{\"n\": 2}\n"
	for i := 0; i < len(input); i += 7 { // odd-sized chunks, as a pipe may deliver them
		end := min(i+7, len(input))
		if _, err := tap.Write([]byte(input[i:end])); err != nil {
			t.Fatal(err)
		}
	}
	if file.String() != input {
		t.Errorf("the log file got %q, want the input unchanged", file.String())
	}
	want := []string{"engine: Stopped the mirror cleanly", "engine: Released partitions (n=2)"}
	if len(told) != len(want) || told[0] != want[0] || told[1] != want[1] {
		t.Errorf("told %q, want %q", told, want)
	}
}
