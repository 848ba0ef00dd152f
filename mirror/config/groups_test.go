package config

import (
	"strings"
	"testing"
	"time"
)

func TestGroups(t *testing.T) {
	tests := map[string]struct {
		extra string
		// wantErrs are substrings that must all be in the error; none means valid.
		wantErrs []string
		interval time.Duration
	}{
		"include with the default interval": {
			extra:    "groups: {include: [\"app-.*\"]}\n",
			interval: DefaultGroupSyncInterval,
		},
		"interval set": {
			extra:    "groups: {include: [\"app\"], exclude: [\"app-tmp\"], syncInterval: 5s}\n",
			interval: 5 * time.Second,
		},
		"include missing and a bad expression": {
			extra:    "groups: {exclude: [\"(\"]}\n",
			wantErrs: []string{"groups.include: Required value", "groups.exclude[0]: Invalid value"},
		},
		"negative interval": {
			extra:    "groups: {include: [\"app\"], syncInterval: -1s}\n",
			wantErrs: []string{"groups.syncInterval: Invalid value"},
		},
		"hash partitioning is refused": {
			extra:    "partitioning: hash\ngroups: {include: [\"app\"]}\n",
			wantErrs: []string{"partitioning: Forbidden: offset translation (groups) needs partitioning: preserve"},
		},
		"a named handler is refused": {
			extra:    "handlers: [{name: fanout}]\ngroups: {include: [\"app\"]}\n",
			wantErrs: []string{"handlers[0].name: Forbidden: offset translation (groups) needs one target record per source record"},
		},
		"a partition transform is refused": {
			extra:    "handlers: [{cel: {transform: {partition: \"0\"}}}]\ngroups: {include: [\"app\"]}\n",
			wantErrs: []string{"handlers[0].cel.transform: Forbidden"},
		},
		"a filter is fine": {
			extra:    "handlers: [{cel: {filter: \"true\"}}]\ngroups: {include: [\"app\"]}\n",
			interval: DefaultGroupSyncInterval,
		},
		"hash partitioning without groups is fine": {
			extra: "partitioning: hash\n",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := Parse([]byte(minimal + tc.extra))
			if len(tc.wantErrs) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if tc.interval == 0 {
					if c.GroupsEnabled() {
						t.Fatal("groups enabled without a groups section")
					}
					return
				}
				if !c.GroupsEnabled() || c.Groups.SyncInterval.Duration != tc.interval {
					t.Fatalf("groups = %+v, want syncInterval %v", c.Groups, tc.interval)
				}
				return
			}
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range tc.wantErrs {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}
