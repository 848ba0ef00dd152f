package cli

import (
	"fmt"
	"io"
	"strconv"
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
offset. Nothing is written unless --commit is given; then the translated offsets are
committed to the group of the same name on the target, only while that group has no
active members (translate fails when it has), and never below its committed offsets.`,
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
			return nil
		},
	}
	cmd.Flags().StringVar(&configPath, "config", "", "the MirrorConfig file of the mirror (YAML)")
	cmd.Flags().StringVar(&group, "group", "", "the source consumer group to translate")
	cmd.Flags().BoolVar(&commit, "commit", false, "commit the translated offsets to the target group of the same name (only while it has no active members)")
	return cmd
}

func printTranslation(out io.Writer, gt *mirror.GroupTranslation, commit bool) {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	header := "TOPIC\tPARTITION\tSOURCE-OFFSET\tTARGET-TOPIC\tTARGET-OFFSET\tLAG\tEXACT\tTARGET-COMMITTED"
	if commit {
		header += "\tRESULT"
	}
	fmt.Fprintln(w, header)
	orDash := func(v int64) string {
		if v < 0 {
			return "-"
		}
		return strconv.FormatInt(v, 10)
	}
	for _, pt := range gt.Partitions {
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\t%s\t%v\t%s", pt.Topic, pt.Partition, pt.SourceOffset, pt.TargetTopic,
			orDash(pt.TargetOffset), orDash(pt.Lag), pt.Exact, orDash(pt.TargetCommitted))
		if commit {
			result := "committed"
			if pt.Renewed {
				result = "committed (unchanged)"
			}
			if !pt.Committed {
				result = "skipped: " + pt.Skipped
			}
			fmt.Fprintf(w, "\t%s", result)
		}
		fmt.Fprintln(w)
	}
	_ = w.Flush()
	fmt.Fprintf(out, "target group %q: %d active members\n", gt.Group, gt.ActiveMembers)
}
