package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// NewFailoverCommand builds `kafka-mirror failover`: the declared failover of a mirror
// to its target cluster, with the report of what it left behind (docs/failover.md).
func NewFailoverCommand() *cobra.Command {
	var (
		configPath, mode, output string
		terminationLog           string
		timeout                  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "failover --config FILE --mode planned|immediate [--timeout D] [-o table|json]",
		Short: "Fail a mirror over to its target cluster and report what was left behind",
		Long: `failover cuts the mirror of --config over to its target cluster in one step and
prints a report: per partition the source end offset at the cutover, the mirror's commit
point, the last source offset mirrored and its target offset, the records left behind
and the target end offset (the failback point); per consumer group (groups.include) the
translated offsets committed to the target and whether they are exact.

The mirror itself must be stopped first (kubectl scale --replicas=0, or SIGTERM to
kafka-mirror run): failover refuses to run next to it.

--mode planned (producers stopped): mirrors, with the mirror's own consumer group,
until every selected partition is committed up to the source's end, stops (drained and
committed), then commits the final checkpoint of every selected group. Nothing is left
behind. It fails when the source still grows after --timeout (naming the partitions
still behind), and refuses to commit any checkpoint when a group is ahead of the
mirror (committed past what is mirrored: "not mirrored that far yet").

--mode immediate (the source is gone or must be abandoned): mirrors nothing more. It
reports what the target holds and, when the source answers within --timeout, the count
of records left behind ("unknown: source unreachable" otherwise), and commits the
checkpoints it can compute from what the target holds.

It exits 0 when the failover completed and 1 otherwise, printing the report in both
cases.`,
		Example: `  kafka-mirror failover --config mirror.yaml --mode planned --timeout 10m
  kafka-mirror failover --config mirror.yaml --mode immediate -o json > failover.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if configPath == "" {
				return fmt.Errorf("--config is required: the MirrorConfig file of the mirror")
			}
			m := mirror.FailoverMode(mode)
			if m != mirror.FailoverPlanned && m != mirror.FailoverImmediate {
				return fmt.Errorf("--mode: %q is not planned or immediate", mode)
			}
			if output != "table" && output != "json" {
				return fmt.Errorf("-o: %q is not table or json", output)
			}
			if timeout < 0 {
				return fmt.Errorf("--timeout: %v is negative", timeout)
			}
			log, err := NewLogger(cmd)
			if err != nil {
				return err
			}
			cfg, err := config.Load(configPath)
			if err != nil {
				return err
			}
			report, err := mirror.Failover(cmd.Context(), cfg, mirror.FailoverOptions{Mode: m, Timeout: timeout}, mirror.WithLogger(log))
			if terminationLog != "" && report != nil {
				_, summary := report.Summarize()
				if werr := os.WriteFile(terminationLog, summary, 0o644); werr != nil {
					log.Error(werr, "Failed to write the failover summary", "path", terminationLog)
				}
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if jerr := enc.Encode(report); jerr != nil {
					return jerr
				}
			} else {
				printFailoverReport(cmd.OutOrStdout(), report)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&configPath, "config", "", "the MirrorConfig file of the mirror (YAML)")
	cmd.Flags().StringVar(&mode, "mode", "", "planned (drain, then cut over) or immediate (cut over now)")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, fmt.Sprintf("planned: the longest the whole failover may take (default %v); immediate: the longest to wait for a cluster's answer (default %v)",
		mirror.DefaultPlannedFailoverTimeout, mirror.DefaultImmediateFailoverTimeout))
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	cmd.Flags().StringVar(&terminationLog, "termination-log", "", "also write a summary of the report (JSON, at most 4 KiB) to this file, such as /dev/termination-log in the operator's failover Job")
	_ = cmd.MarkFlagRequired("mode")
	return cmd
}

// printFailoverReport prints r as a summary line and two tables.
func printFailoverReport(out io.Writer, r *mirror.FailoverReport) {
	state := "completed"
	if !r.Completed {
		state = "FAILED: " + r.Error
	}
	fmt.Fprintf(out, "%s failover of mirror %q: %s\n", r.Mode, r.Mirror, state)
	if r.CutoverAt != nil {
		fmt.Fprintf(out, "cutover at %s", r.CutoverAt.Format(time.RFC3339))
		if !r.SourceReachable {
			fmt.Fprint(out, " (source unreachable)")
		}
		fmt.Fprintln(out)
	}
	orDash := func(v int64) string {
		if v < 0 {
			return "-"
		}
		return strconv.FormatInt(v, 10)
	}
	if len(r.Partitions) > 0 {
		fmt.Fprintln(out)
		w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "TOPIC\tPARTITION\tSOURCE-END\tCOMMITTED\tLAST-MIRRORED\tAT-TARGET-OFFSET\tLEFT-BEHIND\tTARGET-TOPIC\tTARGET-END (FAILBACK)")
		for _, p := range r.Partitions {
			sourceEnd, left := "unknown", p.LeftBehindNote
			if p.SourceEnd != nil {
				sourceEnd = strconv.FormatInt(*p.SourceEnd, 10)
			}
			if p.LeftBehind != nil {
				left = strconv.FormatInt(*p.LeftBehind, 10)
				if p.LeftBehindNote != "" {
					left += " (" + p.LeftBehindNote + ")"
				}
			}
			fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", p.Topic, p.Partition, sourceEnd, orDash(p.Committed),
				orDash(p.LastMirroredOffset), orDash(p.LastMirroredTargetOffset), left, p.TargetTopic, orDash(p.TargetEnd))
		}
		_ = w.Flush()
	}
	if len(r.Groups) > 0 {
		fmt.Fprintln(out)
		w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "GROUP\tTOPIC\tPARTITION\tSOURCE-OFFSET\tTARGET-OFFSET\tEXACT\tRESULT")
		for _, g := range r.Groups {
			for _, p := range g.Partitions {
				exact := strconv.FormatBool(p.Exact)
				if p.AheadOfMirror {
					exact = "false (not mirrored that far yet)"
				}
				fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\t%s\t%s\n", g.Group, p.Topic, p.Partition, p.SourceOffset, orDash(p.TargetOffset), exact, p.Result)
			}
		}
		_ = w.Flush()
	}
}
