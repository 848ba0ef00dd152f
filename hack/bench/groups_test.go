package main

import (
	"strings"
	"testing"
	"time"
)

// TestGroupsTarget: the offset translation target is met when the median throughput
// cost is at most 2% and every groups run wrote offset syncs and checkpointed every
// partition; its value names the median and the CPU cost.
func TestGroupsTarget(t *testing.T) {
	run := func(rps, cpu float64) engineResult {
		return engineResult{Rate: rate{Records: int(rps), Elapsed: time.Second}, CPUPerMillion: cpu}
	}
	pairs := func(costs ...float64) []groupsPair {
		var out []groupsPair
		for _, c := range costs {
			out = append(out, groupsPair{Plain: run(1000, 5), Groups: run(1000*(1-c), 5.1), OffsetSyncs: 40, CheckpointedPartitions: 8})
		}
		return out
	}
	tests := map[string]struct {
		pairs []groupsPair
		met   bool
		value string
	}{
		"within 2%":              {pairs: pairs(0.01, 0.05, -0.01), met: true, value: "1.0% (CPU per record +2.0%, median of 3 pairs)"},
		"above 2%":               {pairs: pairs(0.03, 0.05, 0.01), met: false, value: "3.0%"},
		"no checkpoint happened": {pairs: append(pairs(0, 0), groupsPair{Plain: run(1000, 5), Groups: run(1000, 5)}), met: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := newReport(options{partitions: 8})
			r.Groups = &groupsResult{Pairs: tc.pairs}
			r.Groups.summarise()
			got := r.groupsTargets()
			if len(got) != 1 || got[0].Met != tc.met || !strings.HasPrefix(got[0].Value, tc.value) {
				t.Fatalf("targets %+v; want one, met %v, value starting %q", got, tc.met, tc.value)
			}
		})
	}
	if got := newReport(options{}).groupsTargets(); len(got) != 0 {
		t.Fatalf("targets without the measurement: %+v", got)
	}
}
