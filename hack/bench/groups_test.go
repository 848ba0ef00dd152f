package main

import (
	"strings"
	"testing"
	"time"
)

// TestGroupsTargets: the offset-sync target is met when the median throughput cost of
// the syncs arm is at most 2% and every syncs run wrote offset syncs and checkpointed
// nothing; the supplementary target the same for the groups arm, whose runs must have
// checkpointed every partition. Each value names its median and CPU cost, and says so
// when a run did not do what its arm is for.
func TestGroupsTargets(t *testing.T) {
	run := func(rps, cpu float64) engineResult {
		return engineResult{Rate: rate{Records: int(rps), Elapsed: time.Second}, CPUPerMillion: cpu}
	}
	// round builds a round whose syncs and groups arms cost syncs and groups of plain's
	// throughput, with CPU per record 2% and 4% above plain's.
	round := func(syncs, groups float64) groupsRound {
		return groupsRound{
			Order: []string{armPlain, armSyncs, armGroups},
			Plain: run(1000, 5), Syncs: run(1000*(1-syncs), 5.1), Groups: run(1000*(1-groups), 5.2),
			SyncsOffsetSyncs: 40, OffsetSyncs: 41, CheckpointedPartitions: 8,
		}
	}
	checkpointedOne := round(0, 0)
	checkpointedOne.SyncsCheckpointedPartitions = 1
	noSyncs := round(0, 0)
	noSyncs.SyncsOffsetSyncs = 0
	partial := round(0, 0)
	partial.CheckpointedPartitions = 7
	tests := map[string]struct {
		rounds                []groupsRound
		syncsMet, groupsMet   bool
		syncsValue, groupsVal string
	}{
		"both within 2%": {rounds: []groupsRound{round(0.01, 0.01), round(0.05, 0.05), round(-0.01, 0)},
			syncsMet: true, groupsMet: true,
			syncsValue: "1.0% (CPU per record +2.0%, median of 3 rounds)", groupsVal: "1.0% (CPU per record +4.0%, median of 3 rounds)"},
		"syncs within, checkpoints above": {rounds: []groupsRound{round(0.01, 0.03), round(0.02, 0.04), round(0, 0.05)},
			syncsMet: true, syncsValue: "1.0%", groupsVal: "4.0%"},
		"syncs above 2%": {rounds: []groupsRound{round(0.03, 0.01), round(0.05, 0.01), round(0.01, 0.01)},
			groupsMet: true, syncsValue: "3.0%", groupsVal: "1.0%"},
		"a syncs run checkpointed a group": {rounds: []groupsRound{round(0, 0), checkpointedOne},
			groupsMet: true, syncsValue: "0.0% (CPU per record +2.0%, median of 2 rounds); a run wrote no offset sync or checkpointed a group", groupsVal: "0.0%"},
		"a syncs run wrote no sync": {rounds: []groupsRound{noSyncs},
			groupsMet: true, syncsValue: "0.0% (CPU per record +2.0%, median of 1 rounds); a run wrote no offset sync", groupsVal: "0.0%"},
		"a groups run missed a partition": {rounds: []groupsRound{round(0, 0), partial},
			syncsMet: true, syncsValue: "0.0%", groupsVal: "0.0% (CPU per record +4.0%, median of 2 rounds); a run wrote no offset sync or did not checkpoint every partition"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := newReport(options{partitions: 8})
			r.Groups = &groupsResult{Rounds: tc.rounds}
			r.Groups.summarise()
			got := r.groupsTargets()
			if len(got) != 2 {
				t.Fatalf("targets %+v; want two", got)
			}
			syncs, groups := got[0], got[1]
			if !strings.HasPrefix(syncs.Name, "Cost of offset syncs (") || syncs.Met != tc.syncsMet || !strings.HasPrefix(syncs.Value, tc.syncsValue) {
				t.Errorf("offset-sync target %+v; want met %v, value starting %q", syncs, tc.syncsMet, tc.syncsValue)
			}
			if groups.Name != "Cost of offset syncs + checkpoints at syncInterval 1s, 30x the default (supplementary)" ||
				groups.Met != tc.groupsMet || !strings.HasPrefix(groups.Value, tc.groupsVal) {
				t.Errorf("checkpoint target %+v; want met %v, value starting %q", groups, tc.groupsMet, tc.groupsVal)
			}
			if syncs.Goal != "<= 2% of throughput" || groups.Goal != "<= 2% of throughput (reference)" {
				t.Errorf("goals %q and %q", syncs.Goal, groups.Goal)
			}
		})
	}
	if got := newReport(options{}).groupsTargets(); len(got) != 0 {
		t.Fatalf("targets without the measurement: %+v", got)
	}
}

// TestGroupsMarkdown: results.md gets one row per round with its order, the three
// rates, both CPU costs and what each run wrote and checkpointed.
func TestGroupsMarkdown(t *testing.T) {
	run := func(rps, cpu float64) engineResult {
		return engineResult{Rate: rate{Records: int(rps), Elapsed: time.Second}, CPUPerMillion: cpu}
	}
	r := newReport(options{partitions: 8})
	r.Groups = &groupsResult{Rounds: []groupsRound{{
		Order: []string{armSyncs, armGroups, armPlain},
		Plain: run(100_000, 4), Syncs: run(99_000, 4.04), Groups: run(97_000, 4.2),
		SyncsOffsetSyncs: 1100, OffsetSyncs: 1120, CheckpointedPartitions: 8,
	}}}
	var md strings.Builder
	r.groupsMarkdown(&md)
	want := "| 1 | syncs, groups, plain | 100,000 | 99,000 | 97,000 | +1.0% | +5.0% | 1100, 1120 | 0, 8 |"
	if !strings.Contains(md.String(), want) {
		t.Fatalf("results.md section lacks the row %q:\n%s", want, md.String())
	}
	var none strings.Builder
	newReport(options{}).groupsMarkdown(&none)
	if none.Len() != 0 {
		t.Fatalf("a section without the measurement: %q", none.String())
	}
}
