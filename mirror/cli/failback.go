package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// NewFailbackCommand builds `kafka-mirror failback`: the reverse mirror after a
// failover, started where the failover left the target, with a plan printed first
// (docs/failover.md).
func NewFailbackCommand() *cobra.Command {
	var (
		configPath, from, output string
		planOnly                 bool
	)
	cmd := &cobra.Command{
		Use:   "failback --config REVERSE.yaml --from CONSUMER-GROUP [--plan-only] [-o table|json]",
		Short: "Mirror back what was written to the target after a failover, and list what it left behind",
		Long: `failback runs the reverse mirror of --config (its source is the failed-over mirror's
target, its target the original source) from where the failover left the target: each
partition without progress of its own starts at the target end offset of the cutover, so
exactly the records written to the target after the cutover flow back, none of those
mirrored before. --from is the failed-over mirror's consumerGroup; it sets
initialPositions.fromFailover (the config may set it instead: then "kafka-mirror run"
does the same without the plan). The config needs provenance.enabled.

Before it starts it prints, per partition, where the mirror starts and how many records
written on the target after the cutover will flow back, and, when the original source
answers, the records an immediate failover left behind there (offset ranges never
mirrored): they are never mirrored back or mixed in, only listed; docs/failover.md says
how to mirror or drop them. --plan-only prints the plan and exits.

A partition with progress of its own (a restarted failback) resumes from it. Without a
failover record of --from on the source cluster it stops with an error naming what it
looked for. Then it runs as "kafka-mirror run" until SIGTERM or SIGINT.`,
		Example: `  kafka-mirror failback --config reverse.yaml --from kafka-mirror.default.orders --plan-only
  kafka-mirror failback --config reverse.yaml --from kafka-mirror.default.orders`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if configPath == "" {
				return fmt.Errorf("--config is required: the MirrorConfig file of the reverse mirror")
			}
			if output != "table" && output != "json" {
				return fmt.Errorf("-o: %q is not table or json", output)
			}
			log, err := NewLogger(cmd)
			if err != nil {
				return err
			}
			cfg, err := config.Load(configPath)
			if err != nil {
				return err
			}
			if from != "" {
				if cfg.InitialPositions == nil {
					cfg.InitialPositions = &config.InitialPositions{}
				}
				if set := cfg.InitialPositions.FromFailover; set != "" && set != from {
					return fmt.Errorf("--from %q: %s sets initialPositions.fromFailover to %q", from, configPath, set)
				}
				cfg.InitialPositions.FromFailover = from
			}
			if cfg.InitialPositions == nil || cfg.InitialPositions.FromFailover == "" {
				return fmt.Errorf("--from is required (or initialPositions.fromFailover in %s): the failed-over mirror's consumerGroup", configPath)
			}
			if err := mirror.ValidateConfig(cfg); err != nil {
				return fmt.Errorf("%s: %w", configPath, err)
			}
			plan, err := mirror.PlanFailback(cmd.Context(), cfg, mirror.WithLogger(log))
			if err != nil {
				return err
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(plan); err != nil {
					return err
				}
			} else {
				printFailbackPlan(cmd.OutOrStdout(), cfg.ConsumerGroup, plan)
			}
			if planOnly {
				return nil
			}
			log.Info("Starting the failback mirror", "summary", runSummary(cfg), "fromFailover", cfg.InitialPositions.FromFailover)
			e, err := mirror.New(cfg, mirror.WithLogger(log))
			if err != nil {
				return err
			}
			if err := e.Run(cmd.Context()); err != nil {
				return err
			}
			s := e.Stats()
			log.Info("Stopped the failback mirror cleanly", "records", s.Records, "bytes", s.Bytes, "commits", s.Commits)
			return nil
		},
	}
	cmd.Flags().StringVar(&configPath, "config", "", "the MirrorConfig file of the reverse mirror (YAML)")
	cmd.Flags().StringVar(&from, "from", "", "the failed-over mirror's consumerGroup (sets initialPositions.fromFailover)")
	cmd.Flags().BoolVar(&planOnly, "plan-only", false, "print the plan and exit without mirroring")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json (the plan)")
	return cmd
}

// printFailbackPlan prints p as a summary line and two tables.
func printFailbackPlan(out io.Writer, group string, p *mirror.FailbackPlan) {
	h := p.Failover
	fmt.Fprintf(out, "failback mirror %q from the %s failover of mirror %q (cutover at %s)\n", group, h.Mode, h.Mirror, h.CutoverAt.Format(time.RFC3339))
	orDash := func(v int64) string {
		if v < 0 {
			return "-"
		}
		return strconv.FormatInt(v, 10)
	}
	fmt.Fprintln(out)
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TOPIC\tPARTITION\tFAILBACK-POINT\tSTART\tSTART-FROM\tEND\tTO-COPY-BACK")
	for _, pp := range p.Partitions {
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\t%s\t%s\n", pp.Topic, pp.Partition, pp.FailbackPoint, orDash(pp.Start), pp.StartFrom, orDash(pp.End), orDash(pp.ToCopy))
	}
	_ = w.Flush()
	if len(p.Groups) > 0 {
		fmt.Fprintln(out)
		w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "GROUP\tTOPIC\tPARTITION\tOFFSET\tFAILBACK-POINT\tORIGINAL-SOURCE-OFFSET\tACTION")
		for _, g := range p.Groups {
			fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%s\t%s\n", g.Group, g.Topic, g.Partition, g.Offset, g.FailbackPoint, orDash(g.OriginalSourceOffset), g.Action)
		}
		_ = w.Flush()
	}
	fmt.Fprintln(out)
	if len(p.LeftBehind) == 0 {
		fmt.Fprintln(out, "left behind on the original source: none")
		return
	}
	fmt.Fprintln(out, "left behind on the original source (never mirrored, and not mirrored back by the failback: mirror or drop them, see docs/failover.md):")
	w = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TOPIC\tPARTITION\tFROM\tTO (EXCLUSIVE)\tRECORDS\tNOTE")
	for _, lb := range p.LeftBehind {
		fmt.Fprintf(w, "%s\t%d\t%d\t%s\t%s\t%s\n", lb.Topic, lb.Partition, lb.From, orDash(lb.To), orDash(lb.Count), lb.Note)
	}
	_ = w.Flush()
}
