package cli

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// NewOffsetsCommand builds `kafka-mirror offsets`, the consumer-group offset tools for
// a failover (docs/failover.md).
func NewOffsetsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "offsets",
		Short: "Translate consumer-group offsets from the source to the target cluster",
		Long: `offsets holds the tools for moving consumer groups to the target cluster
(docs/failover.md). They read the offset syncs a mirror writes to the target when its
config sets groups.`,
		Example: `  kafka-mirror offsets translate --config mirror.yaml --group payments-app`,
		Args:    cobra.NoArgs,
	}
	cmd.AddCommand(newTranslateCommand())
	return cmd
}

func newTranslateCommand() *cobra.Command {
	var (
		configPath, group string
		commit            bool
	)
	cmd := &cobra.Command{
		Use:   "translate --config FILE --group GROUP [--commit]",
		Short: "Print (and with --commit, commit) a source group's offsets translated to the target",
		Long: `translate reads the offset syncs the mirror of --config wrote to the target cluster
(it writes them when the config sets groups) and translates the committed offsets of
source consumer group --group, for every mirrored partition, to target offsets: the
target offset from which a consumer reads every record at or after the source offset.
No record is skipped, also when two owners of a partition wrote it at once (a drain
that gave up, a restart); EXACT=false marks a partition whose translation may repeat
records: those between the last offset sync and the source offset (at most 1000), or
those both owners copied (docs/failover.md).

It prints per partition the source offset, the target offset, the target's lag after
it (records the group would read on the target) and the target group's committed
offset, and a NOTE where there is more to say:
  - "not mirrored that far yet": the source group committed past what the mirror
    mirrored (its own committed offset, named in the note). TARGET-OFFSET is where the
    next record will land and LAG is -: a consumer moved now would read again every
    record between once the mirror copies it. Let the mirror catch up (its lag 0).
  - a partition the source group never committed: SOURCE-OFFSET is -, and the note
    says what the target group does there: resume at its own committed offset, or,
    with none, start at its consumers' auto.offset.reset (the target's earliest and
    latest offsets are given).
Nothing is written unless --commit is given; then the translated offsets are
committed to the group of the same name on the target, only while that group has no
active members (translate fails when it has), never below its committed offsets, and
not for a partition not mirrored that far yet (translate fails naming them; run it
again once the mirror caught up). RESULT says per partition what was done.`,
		Example: `  kafka-mirror offsets translate --config mirror.yaml --group payments-app
  kafka-mirror offsets translate --config mirror.yaml --group payments-app --commit`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if configPath == "" || group == "" {
				return fmt.Errorf("--config and --group are required")
			}
			log, err := NewLogger(cmd)
			if err != nil {
				return err
			}
			cfg, err := config.Load(configPath)
			if err != nil {
				return err
			}
			gt, err := mirror.TranslateGroup(cmd.Context(), cfg, group, commit, mirror.WithLogger(log))
			if gt != nil {
				printTranslation(cmd.OutOrStdout(), gt, commit)
			}
			if err != nil {
				return err
			}
			if len(gt.Partitions) == 0 {
				return fmt.Errorf("source group %q has no committed offsets for the mirrored topics", group)
			}
			if commit && gt.ActiveMembers > 0 {
				return fmt.Errorf("target group %q has %d active members: nothing committed (stop its consumers on the target first)", group, gt.ActiveMembers)
			}
			if ahead := notMirrored(gt); commit && len(ahead) > 0 {
				return fmt.Errorf("target group %q: %s not committed, not mirrored that far yet: the source group's offset is past the mirror's there, "+
					"and a consumer moved now would read again what the mirror copies later; let the mirror catch up (its lag 0) and run again", group, strings.Join(ahead, ", "))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&configPath, "config", "", "the MirrorConfig file of the mirror (YAML)")
	cmd.Flags().StringVar(&group, "group", "", "the source consumer group to translate")
	cmd.Flags().BoolVar(&commit, "commit", false, "commit the translated offsets to the target group of the same name (only while it has no active members, and only where the mirror mirrored as far as the group's offset)")
	return cmd
}

// notMirrored names the partitions of gt the source group committed past what the
// mirror mirrored.
func notMirrored(gt *mirror.GroupTranslation) []string {
	var out []string
	for _, pt := range gt.Unmirrored() {
		out = append(out, fmt.Sprintf("%s/%d", pt.Topic, pt.Partition))
	}
	return out
}

func printTranslation(out io.Writer, gt *mirror.GroupTranslation, commit bool) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	header := "TOPIC\tPARTITION\tSOURCE-OFFSET\tTARGET-TOPIC\tTARGET-OFFSET\tLAG\tEXACT\tTARGET-COMMITTED"
	if commit {
		header += "\tRESULT"
	}
	fmt.Fprintln(w, header+"\tNOTE")
	rows := slices.Concat(gt.Partitions, gt.Uncommitted)
	slices.SortStableFunc(rows, func(a, b mirror.PartitionTranslation) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	for _, pt := range rows {
		lag, exact := orDash(pt.Lag), strconv.FormatBool(pt.Exact)
		if pt.AheadOfMirror {
			// The records before the group's offset are not on the target yet: a lag
			// measured against what is there would look caught up.
			lag = "-"
		}
		if pt.NotCommitted() {
			exact = "-"
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s", pt.Topic, pt.Partition, orDash(pt.SourceOffset), pt.TargetTopic,
			orDash(pt.TargetOffset), lag, exact, orDash(pt.TargetCommitted))
		if commit {
			result := "committed"
			if pt.Renewed {
				result = "committed (unchanged)"
			}
			switch {
			case pt.NotCommitted():
				result = "skipped: the source group has no committed offset"
			case !pt.Committed:
				result = "skipped: " + pt.Skipped
			}
			fmt.Fprintf(w, "\t%s", result)
		}
		fmt.Fprintf(w, "\t%s\n", translationNote(pt))
	}
	_ = w.Flush()
	fmt.Fprintf(out, "target group %q: %d active members\n", gt.Group, gt.ActiveMembers)
	if ahead := notMirrored(gt); len(ahead) > 0 && !commit {
		fmt.Fprintf(out, "not mirrored that far yet: %s (the source group is ahead of the mirror; wait until the mirror's lag is 0)\n", strings.Join(ahead, ", "))
	}
}

// translationNote is the NOTE of a row: what its numbers alone do not say.
func translationNote(pt mirror.PartitionTranslation) string {
	switch {
	case pt.NotCommitted() && pt.TargetCommitted >= 0:
		return fmt.Sprintf("no source offset: the target group resumes at its committed offset %d", pt.TargetCommitted)
	case pt.NotCommitted():
		return fmt.Sprintf("no source offset, no target offset: consumers start at their auto.offset.reset (earliest %s, latest %s)",
			orDash(pt.TargetStart), orDash(pt.TargetEnd))
	case pt.AheadOfMirror:
		return fmt.Sprintf("not mirrored that far yet: the mirror is at source offset %d, %d records behind", pt.MirroredTo, pt.SourceOffset-pt.MirroredTo)
	case pt.TargetOffset < 0:
		return "no offset sync at or below the source offset"
	}
	return ""
}

func orDash(v int64) string {
	if v < 0 {
		return "-"
	}
	return strconv.FormatInt(v, 10)
}
