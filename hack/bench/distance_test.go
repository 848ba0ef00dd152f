package main

import (
	"slices"
	"testing"
	"time"
)

// TestDistanceOptions checks the across-regions flags: the layouts they make, the quick
// defaults, and the errors that name the flag.
func TestDistanceOptions(t *testing.T) {
	o, err := parseOptions(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []distanceCase{
		{TargetRTT: 0, TargetBrokers: 1}, {TargetRTT: 20 * time.Millisecond, TargetBrokers: 1}, {TargetRTT: 100 * time.Millisecond, TargetBrokers: 1},
		{TargetRTT: 0, TargetBrokers: 3}, {TargetRTT: 20 * time.Millisecond, TargetBrokers: 3}, {TargetRTT: 100 * time.Millisecond, TargetBrokers: 3},
		{SourceRTT: 100 * time.Millisecond, TargetBrokers: 3},
	}
	if got := o.distanceCases(); !slices.Equal(got, want) {
		t.Errorf("default layouts %v, want %v", got, want)
	}
	if o.distanceRecords != 200_000 || o.distanceValueSize != 1024 || !o.distance || o.latencyOnly {
		t.Errorf("defaults: records %d, value size %d, across-regions %v, latency-only %v", o.distanceRecords, o.distanceValueSize, o.distance, o.latencyOnly)
	}
	q, err := parseOptions([]string{"--quick", "--latency-only"})
	if err != nil {
		t.Fatal(err)
	}
	if q.distanceRecords != 50_000 || len(q.distanceCases()) != 3 || !q.latencyOnly {
		t.Errorf("quick: records %d, layouts %v", q.distanceRecords, q.distanceCases())
	}
	one, err := parseOptions([]string{"--distance-rtts", "100ms", "--distance-brokers", "1", "--distance-source=false", "--distance-arms", "engine,franz-go"})
	if err != nil {
		t.Fatal(err)
	}
	if got := one.distanceCases(); !slices.Equal(got, []distanceCase{{TargetRTT: 100 * time.Millisecond, TargetBrokers: 1}}) || !slices.Equal(one.distanceArms, []string{"engine", "franz-go"}) {
		t.Errorf("one layout, two arms: layouts %v, arms %v", got, one.distanceArms)
	}
	far, err := parseOptions([]string{"--distance-rtts", "100ms", "--distance-brokers", "1,3", "--distance-target=false"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := far.distanceCases(), []distanceCase{{SourceRTT: 100 * time.Millisecond, TargetBrokers: 1}, {SourceRTT: 100 * time.Millisecond, TargetBrokers: 3}}; !slices.Equal(got, want) {
		t.Errorf("source far only: layouts %v, want %v", got, want)
	}
	for name, args := range map[string][]string{
		"unknown arm":    {"--distance-arms", "mm2"},
		"bad round trip": {"--distance-rtts", "soon"},
		"no brokers":     {"--distance-brokers", ""},
		"zero records":   {"--distance-records", "0"},
		"no layout":      {"--distance-target=false", "--distance-source=false"},
	} {
		if _, err := parseOptions(args); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}
