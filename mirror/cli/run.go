package cli

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
)

// NewRunCommand builds `kafka-mirror run`: the mirror engine on its own, from one
// config file, until SIGTERM or SIGINT. Named handlers and rebalance listeners come from
// the handler registry, so handlers registered before the command runs are available.
func NewRunCommand() *cobra.Command {
	var (
		configPath     string
		metricsAddress string
	)
	cmd := &cobra.Command{
		Use:   "run --config FILE",
		Short: "Mirror topics from a source to a target Kafka cluster",
		Long: `run starts the mirror engine with the MirrorConfig file given by --config and runs
until it receives SIGTERM or SIGINT. On a signal it stops reading, waits until the
target acknowledged every record in flight, commits and exits 0: a restart mirrors
nothing twice.

A fatal error (a record the target finally refused, a handler failure, a committed
offset that fell out of the source's retention) stops the engine without committing
past the failed record and exits non-zero with a one-line error naming the cluster and
the cause. A cluster that cannot be reached is retried with backoff, each attempt
logged with the cluster and the cause, and /readyz fails until it connects.

/metrics, /healthz and /readyz are served on metrics.address (":8080" by default;
--metrics-address overrides it, "0" turns the endpoint off).`,
		Example: `  kafka-mirror run --config examples/mirror.yaml
  kafka-mirror run --config mirror.yaml --metrics-address :9090 --log-format json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if configPath == "" {
				return fmt.Errorf("--config is required: the MirrorConfig file to run")
			}
			log, err := NewLogger(cmd)
			if err != nil {
				return err
			}
			cfg, err := config.Load(configPath)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("metrics-address") {
				cfg.Metrics.Address = metricsAddress
				if err := cfg.Validate(); err != nil {
					return fmt.Errorf("--metrics-address: %w", err)
				}
			}
			if err := mirror.ValidateConfig(cfg); err != nil {
				return fmt.Errorf("%s: %w", configPath, err)
			}
			if limit, reason := setMemoryLimit(os.Getenv, cgroupMemoryMax); limit > 0 {
				log.Info("Set the Go memory limit to 90% of the container's", "bytes", limit)
			} else {
				log.V(1).Info("Left the Go memory limit alone", "reason", reason)
			}
			log.Info("Starting the mirror", "summary", runSummary(cfg))
			e, err := mirror.New(cfg, mirror.WithLogger(log))
			if err != nil {
				return err
			}
			if err := e.Run(cmd.Context()); err != nil {
				return err
			}
			s := e.Stats()
			log.Info("Stopped the mirror cleanly", "records", s.Records, "bytes", s.Bytes, "filtered", s.Filtered, "commits", s.Commits)
			return nil
		},
	}
	cmd.Flags().StringVar(&configPath, "config", "", "the MirrorConfig file (YAML)")
	cmd.Flags().StringVar(&metricsAddress, "metrics-address", "", `listen address of /metrics, /healthz and /readyz; overrides metrics.address ("0": off)`)
	return cmd
}

// runSummary is the one line a person reads to see what this process mirrors.
func runSummary(cfg *config.Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "source [%s] -> target [%s], group %q, topics include %q",
		strings.Join(cfg.Source.BootstrapServers, ","), strings.Join(cfg.Target.BootstrapServers, ","),
		cfg.ConsumerGroup, cfg.Topics.Include)
	if len(cfg.Topics.Exclude) > 0 {
		fmt.Fprintf(&b, " exclude %q", cfg.Topics.Exclude)
	}
	if r := cfg.Topics.Rename; r != nil && (r.Prefix != "" || r.Template != "") {
		fmt.Fprintf(&b, " renamed by %q", r.Prefix+r.Template)
	} else if r != nil && r.StripPrefix != "" {
		fmt.Fprintf(&b, " renamed by stripping %q", r.StripPrefix)
	}
	policy := "noDataLoss"
	if !cfg.NoDataLossEnabled() {
		policy = "fast (noDataLoss: false)"
	}
	fmt.Fprintf(&b, ", partitioning %s, %s, %d streams, syncTopics %v, %d handlers",
		cfg.Partitioning, policy, cfg.Streams, cfg.SyncTopicsEnabled(), len(cfg.Handlers))
	if cfg.Source.Rack != "" {
		rack := kafka.ResolveRack(cfg.Source.Rack)
		if rack == "" {
			rack = "none (" + cfg.Source.Rack + " is empty: fetching from leaders)"
		}
		fmt.Fprintf(&b, ", source rack %s", rack)
	}
	return b.String()
}
