package mirror

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestFailoverSummaryBounded: the summary lists every partition and group while it
// fits in a termination message, and keeps only the totals beyond, always within
// MaxFailoverSummaryBytes, with the counts of the whole report.
func TestFailoverSummaryBounded(t *testing.T) {
	report := func(partitions int, errText string) *FailoverReport {
		r := &FailoverReport{Mode: FailoverImmediate, Mirror: "orders", Error: errText}
		for i := range partitions {
			p := FailoverPartition{Topic: "orders", Partition: int32(i), Committed: 10, TargetEnd: 12}
			switch i % 3 {
			case 0:
				left := int64(5)
				p.LeftBehind = &left
			case 1:
				p.LeftBehindNote = UnknownSourceUnreachable
			case 2:
				left := int64(2)
				p.LeftBehind, p.LeftBehindNote = &left, "at most: the mirror did not stop cleanly"
			}
			r.Partitions = append(r.Partitions, p)
		}
		r.Groups = []FailoverGroup{{Group: "app", Partitions: []FailoverGroupPartition{{Exact: true, Committed: true}, {Committed: true}, {}}}}
		return r
	}
	tests := map[string]struct {
		partitions    int
		errText       string
		wantTruncated bool
	}{
		"few partitions":  {partitions: 6},
		"many partitions": {partitions: 3000, wantTruncated: true},
		"huge error":      {partitions: 3, errText: strings.Repeat("x", 100_000)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s, out := report(tc.partitions, tc.errText).Summarize()
			if len(out) > MaxFailoverSummaryBytes {
				t.Fatalf("the summary is %d bytes, over %d", len(out), MaxFailoverSummaryBytes)
			}
			var back FailoverSummary
			if err := json.Unmarshal(out, &back); err != nil {
				t.Fatal(err)
			}
			third := tc.partitions / 3
			want := fmt.Sprintf("partitions %d leftBehind %d unknown %d truncated %v", tc.partitions, 7*third, 2*third, tc.wantTruncated)
			got := fmt.Sprintf("partitions %d leftBehind %d unknown %d truncated %v", back.Partitions, back.LeftBehind, back.LeftBehindUnknown, back.Truncated)
			if got != want {
				t.Fatalf("summary %s, want %s", got, want)
			}
			if tc.wantTruncated != (len(back.PartitionDetails) == 0) {
				t.Fatalf("%d partition details, truncated %v", len(back.PartitionDetails), back.Truncated)
			}
			if !tc.wantTruncated && (len(back.GroupDetails) != 1 || back.GroupDetails[0] != (FailoverSummaryGroup{Group: "app", Partitions: 3, Committed: 2, Exact: 1})) {
				t.Fatalf("group details %+v", back.GroupDetails)
			}
			if len(back.Error) > maxSummaryErrorBytes+3 || len(s.Error) != len(back.Error) {
				t.Fatalf("the error is %d bytes", len(back.Error))
			}
		})
	}
}
