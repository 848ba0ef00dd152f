package cli

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version and commit are stamped at build time by the Makefile and the Dockerfile:
//
//	-ldflags "-X github.com/kafka-mirror/kafka-mirror-operator/mirror/cli.version=...
//	          -X github.com/kafka-mirror/kafka-mirror-operator/mirror/cli.commit=..."
//
// They live here rather than in package main so that a team's own image, whose main is
// not ours, is stamped with the same flags. A plain `go build` or `go run` leaves them as
// below, and versionInfo then falls back to what the Go toolchain recorded.
var (
	version = "dev"
	commit  = "unknown"
)

// Version returns the version stamped into the binary at build time, or "dev" when it
// was built without -ldflags. The operator tags its default engine image with it.
func Version() string { return version }

// saramaModule is the Kafka client library whose version `version` reports, because
// most wire-protocol behaviour users ask about depends on it.
const saramaModule = "github.com/IBM/sarama"

// buildVersion describes the running binary.
type buildVersion struct {
	Version string
	Commit  string
	Go      string
	Sarama  string
}

// versionInfo collects the stamped version and commit, the Go version and the sarama
// version from the binary's embedded build information.
func versionInfo() buildVersion {
	info, _ := debug.ReadBuildInfo()
	return describeBuild(version, commit, info)
}

// describeBuild combines the stamped version and commit with the build information
// the Go toolchain recorded (nil when there is none).
func describeBuild(version, commit string, info *debug.BuildInfo) buildVersion {
	v := buildVersion{Version: version, Commit: commit, Go: runtime.Version(), Sarama: "unknown"}
	if info == nil {
		return v
	}
	for _, dep := range info.Deps {
		if dep.Path != saramaModule {
			continue
		}
		v.Sarama = dep.Version
		if dep.Replace != nil {
			v.Sarama = dep.Replace.Version + " (replaced by " + dep.Replace.Path + ")"
		}
	}
	// A build without -ldflags (go build, go install) still records the VCS revision.
	if v.Commit == "unknown" {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				v.Commit = s.Value
				if len(v.Commit) > 12 {
					v.Commit = v.Commit[:12]
				}
			}
		}
	}
	if v.Version == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		v.Version = info.Main.Version
	}
	return v
}

func (v buildVersion) write(w io.Writer) error {
	_, err := fmt.Fprintf(w, "kafka-mirror %s\n  commit: %s\n  go:     %s\n  sarama: %s\n", v.Version, v.Commit, v.Go, v.Sarama)
	return err
}

// NewVersionCommand builds `kafka-mirror version`.
func NewVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit, Go and sarama versions",
		Long: `Print the version and commit this binary was built from, the Go version that built
it and the version of sarama, the Kafka client library it speaks the wire protocol with.`,
		Example: `  kafka-mirror version`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return versionInfo().write(cmd.OutOrStdout())
		},
	}
}
