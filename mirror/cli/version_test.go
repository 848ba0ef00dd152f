package cli

import (
	"bytes"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersionCommand checks what `version` prints from the stamped variables. A test
// binary of a library package records no module dependencies, so the sarama line is
// "unknown" here; the examples/custom-handler test checks it in a real build, and
// describeBuild is tested below.
func TestVersionCommand(t *testing.T) {
	oldVersion, oldCommit := version, commit
	t.Cleanup(func() { version, commit = oldVersion, oldCommit })
	version, commit = "v1.2.3", "abc1234"

	var out bytes.Buffer
	root := NewRootCommand()
	root.SetOut(&out)
	root.SetArgs([]string{"version"})
	if err := root.Execute(); err != nil {
		t.Fatalf("version failed: %v", err)
	}
	want := "kafka-mirror v1.2.3\n" +
		"  commit: abc1234\n" +
		"  go:     " + runtime.Version() + "\n" +
		"  sarama: " + versionInfo().Sarama + "\n"
	if got := out.String(); got != want {
		t.Errorf("version printed\n%s\nwant\n%s", got, want)
	}
	if Version() != "v1.2.3" {
		t.Errorf("Version() = %q, want the stamped v1.2.3", Version())
	}
}

// TestDescribeBuild checks how the stamped values and the toolchain's build information
// combine: stamps win, and an unstamped build falls back to the module version and the
// VCS revision.
func TestDescribeBuild(t *testing.T) {
	sarama := &debug.Module{Path: saramaModule, Version: "v1.61.1"}
	tests := map[string]struct {
		version, commit string
		info            *debug.BuildInfo
		want            buildVersion
	}{
		"no build information": {
			version: "dev", commit: "unknown",
			want: buildVersion{Version: "dev", Commit: "unknown", Sarama: "unknown"},
		},
		"stamped": {
			version: "v1.2.3", commit: "abc1234",
			info: &debug.BuildInfo{Main: debug.Module{Version: "v9.9.9"}, Deps: []*debug.Module{sarama},
				Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef"}}},
			want: buildVersion{Version: "v1.2.3", Commit: "abc1234", Sarama: "v1.61.1"},
		},
		"go install: module version and VCS revision, shortened": {
			version: "dev", commit: "unknown",
			info: &debug.BuildInfo{Main: debug.Module{Version: "v0.3.0"}, Deps: []*debug.Module{sarama},
				Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef"}}},
			want: buildVersion{Version: "v0.3.0", Commit: "0123456789ab", Sarama: "v1.61.1"},
		},
		"go build in a checkout: (devel) is not a version": {
			version: "dev", commit: "unknown",
			info: &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Deps: []*debug.Module{sarama}},
			want: buildVersion{Version: "dev", Commit: "unknown", Sarama: "v1.61.1"},
		},
		"replaced sarama": {
			version: "dev", commit: "unknown",
			info: &debug.BuildInfo{Deps: []*debug.Module{{Path: saramaModule, Version: "v1.61.1",
				Replace: &debug.Module{Path: "example.com/sarama", Version: "v1.61.2-fix"}}}},
			want: buildVersion{Version: "dev", Commit: "unknown", Sarama: "v1.61.2-fix (replaced by example.com/sarama)"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tc.want.Go = runtime.Version()
			if got := describeBuild(tc.version, tc.commit, tc.info); got != tc.want {
				t.Errorf("describeBuild() = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestVersionCommandRejectsArguments(t *testing.T) {
	root := NewRootCommand()
	root.SetOut(&bytes.Buffer{})
	root.SetErr(&bytes.Buffer{})
	root.SetArgs([]string{"version", "extra"})
	err := root.Execute()
	if err == nil || !strings.Contains(err.Error(), "unknown command") && !strings.Contains(err.Error(), "accepts 0 arg") {
		t.Fatalf("version extra: got error %v, want an argument error", err)
	}
}
