package cli

import (
	"math"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
)

func TestSetMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1)) // restore the test binary's limit
	dir := t.TempDir()
	tests := map[string]struct {
		env        string
		file       string
		wantLimit  int64
		wantReason string
	}{
		"512 MiB container":   {file: testutil.WriteFile(t, dir, "limited", "536870912\n"), wantLimit: 483183820},
		"no limit":            {file: testutil.WriteFile(t, dir, "unlimited", "max\n"), wantReason: "the container has no memory limit"},
		"GOMEMLIMIT wins":     {env: "300MiB", file: testutil.WriteFile(t, dir, "limited2", "536870912\n"), wantReason: "GOMEMLIMIT is set to 300MiB"},
		"not cgroup v2":       {file: filepath.Join(dir, "missing"), wantReason: "no cgroup v2 memory limit: "},
		"garbage in the file": {file: testutil.WriteFile(t, dir, "garbage", "lots\n"), wantReason: `unreadable memory limit "lots"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			debug.SetMemoryLimit(math.MaxInt64)
			getenv := func(k string) string {
				if k == "GOMEMLIMIT" {
					return tc.env
				}
				return ""
			}
			got, reason := setMemoryLimit(getenv, tc.file)
			if got != tc.wantLimit {
				t.Fatalf("limit = %d, want %d (reason %q)", got, tc.wantLimit, reason)
			}
			if !strings.HasPrefix(reason, tc.wantReason) {
				t.Fatalf("reason = %q, want prefix %q", reason, tc.wantReason)
			}
			runtimeLimit := debug.SetMemoryLimit(-1)
			if tc.wantLimit > 0 && runtimeLimit != tc.wantLimit {
				t.Fatalf("runtime limit = %d, want %d", runtimeLimit, tc.wantLimit)
			}
			if tc.wantLimit == 0 && runtimeLimit != math.MaxInt64 {
				t.Fatalf("runtime limit changed to %d although nothing should be set", runtimeLimit)
			}
		})
	}
}
