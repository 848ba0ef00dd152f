package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/demo"
)

// demoOptions are the flags of `kafka-mirror demo`.
type demoOptions struct {
	records     int
	rate        int
	duration    time.Duration
	keepRunning bool
	// activeActive plays the active-active scene instead (demo.RunActiveActive).
	activeActive bool
	// failover plays the failover and failback scene instead (demo.RunFailback).
	failover bool
	// exactlyOnce runs the engine with delivery exactlyOnce (demo.Options.ExactlyOnce).
	exactlyOnce bool
	// kafka is embedded (kfake) or real (Apache Kafka from the cache; demo.Options.RealKafka).
	kafka string
}

func newDemoCommand() *cobra.Command {
	var o demoOptions
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Mirror between two embedded Kafka clusters, kill the engine, and prove nothing was lost",
		Long: `Run the quick start: nothing to install, no Kafka, no Kubernetes, no Docker.

The demo starts a source and a target Kafka cluster inside this process (kfake, a
Kafka wire-protocol implementation, on loopback ports it prints), creates source topics
with different partition counts and syncs them to the target with the operator's own
topic-sync code. It then runs the mirror engine as a child process
(kafka-mirror run --config mirror.yaml) with a CEL filter, while a producer writes keyed
records with headers at a steady rate and a live view shows records/s, bytes/s, lag per
topic, in-flight records and commits.

Part-way through, a source topic gains partitions (the target follows), and the engine
is killed with SIGKILL (no drain, no final commit) and restarted. At the end the engine
is stopped with SIGTERM and an independent reader audits the target against every record
the source acknowledged: produced, mirrored, filtered, lost, duplicated, out of order,
partition counts. The command exits non-zero if any record was lost or any other promise
was broken. Ctrl-C stops everything cleanly at any time.

With --active-active it plays another scene: clusters dc1 and dc2 both hold the topic
orders, two engines mirror dc1 -> dc2 and dc2 -> dc1 under the same name with loop
prevention (provenance) on, both clusters are written at once, and each is audited by
record id: its own records and its peer's, each exactly once, none looped back.

With --failover it plays the failover scene: a mirror a -> b with an application
group, a planned failover (kafka-mirror failover, its report printed) that moves the
group to b, producers and the application working on b, then kafka-mirror failback
(its plan printed), which copies back exactly what was written to b after the cutover
and moves the group back to a. Both clusters are audited by record id: every record
exactly once, and the application skipped nothing either way.

With --exactly-once the engine runs with delivery exactlyOnce (records and source
offsets in one target transaction per source partition) and the target is audited as a
read_committed consumer reads it: after the kill -9 it must hold every record exactly
once, so a single duplicate fails the demo.`,
		Example: `  # The quick start (also: make demo), about 30 seconds
  kafka-mirror demo

  # A longer run: 60 seconds at 2000 records/s
  kafka-mirror demo --rate 2000 --duration 60s

  # Leave both clusters up afterwards and point your own client at them
  kafka-mirror demo --keep-running

  # Two clusters mirroring the same topic into each other, without loops
  kafka-mirror demo --active-active

  # Fail over to the other cluster and back, with an application group
  kafka-mirror demo --failover

  # The kill scene with delivery exactlyOnce: 0 duplicates after the kill
  kafka-mirror demo --exactly-once

  # The same scenes on two real Apache Kafka brokers (make kafka fetches the jars once)
  kafka-mirror demo --kafka real`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			records, err := o.recordCount(cmd.Flags().Changed("records"))
			if err != nil {
				return err
			}
			if o.kafka != "embedded" && o.kafka != "real" {
				return fmt.Errorf("--kafka %q: want embedded (kfake clusters inside this process) or real (Apache Kafka brokers from the jars make kafka fetches)", o.kafka)
			}
			if o.kafka == "real" && o.failover {
				return errors.New("--kafka real plays the main scene only; the failover scene runs on embedded clusters")
			}
			if o.kafka == "real" && o.activeActive {
				return errors.New("--kafka real plays the main scene only; the active-active scene runs on embedded clusters")
			}
			self, err := os.Executable()
			if err != nil {
				return fmt.Errorf("while locating the kafka-mirror binary to run the engine: %w", err)
			}
			out := cmd.OutOrStdout()
			if o.failover {
				res, err := demo.RunFailback(cmd.Context(), demo.Options{
					Records: records, Rate: o.rate, Out: out,
					Engine: func(args ...string) *exec.Cmd { return exec.Command(self, args...) },
				})
				if err != nil {
					if cmd.Context().Err() != nil {
						return errors.New("interrupted: the engines were stopped and the clusters shut down")
					}
					return fmt.Errorf("the demo could not finish: %w", err)
				}
				return res.Err()
			}
			if o.activeActive {
				res, err := demo.RunActiveActive(cmd.Context(), demo.Options{
					Records: records, Rate: o.rate, Out: out,
					Engine: func(args ...string) *exec.Cmd { return exec.Command(self, args...) },
				})
				if err != nil {
					if cmd.Context().Err() != nil {
						return errors.New("interrupted: the engines were stopped and the clusters shut down")
					}
					return fmt.Errorf("the demo could not finish: %w", err)
				}
				return res.Err()
			}
			// Redraw in place only where the cursor can move; a pipe or a dumb
			// terminal gets one plain line per interval.
			tty := out == os.Stdout && term.IsTerminal(int(os.Stdout.Fd())) && os.Getenv("TERM") != "dumb"
			width := 0
			if tty {
				width, _, _ = term.GetSize(int(os.Stdout.Fd()))
			}
			res, err := demo.Run(cmd.Context(), demo.Options{
				Records:     records,
				Rate:        o.rate,
				KeepRunning: o.keepRunning,
				ExactlyOnce: o.exactlyOnce,
				RealKafka:   o.kafka == "real",
				Engine:      func(args ...string) *exec.Cmd { return exec.Command(self, args...) },
				Out:         out,
				TTY:         tty,
				Width:       width,
			})
			if err != nil {
				if cmd.Context().Err() != nil {
					return errors.New("interrupted: the engine was stopped and the clusters shut down")
				}
				return fmt.Errorf("the demo could not finish: %w", err)
			}
			return res.Err()
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.records, "records", demo.DefaultRecords, "number of records to produce")
	f.IntVar(&o.rate, "rate", demo.DefaultRate, "records per second over all partitions (0: as fast as possible)")
	f.DurationVar(&o.duration, "duration", 0, "produce for this long at --rate instead of a fixed --records")
	f.BoolVar(&o.keepRunning, "keep-running", false, "after the report, keep the clusters up, print their addresses and wait for Ctrl-C")
	f.BoolVar(&o.activeActive, "active-active", false, "play the active-active scene: two clusters mirror the same topic into each other with loop prevention, both written at once")
	cmd.MarkFlagsMutuallyExclusive("records", "duration")
	f.BoolVar(&o.exactlyOnce, "exactly-once", false, "run the engine with delivery exactlyOnce and audit the target read_committed: the report must show 0 duplicates after the kill")
	cmd.MarkFlagsMutuallyExclusive("active-active", "keep-running")
	cmd.MarkFlagsMutuallyExclusive("active-active", "exactly-once")
	f.BoolVar(&o.failover, "failover", false, "play the failover scene: a planned failover with an application group, then the failback, audited on both clusters")
	cmd.MarkFlagsMutuallyExclusive("failover", "active-active")
	cmd.MarkFlagsMutuallyExclusive("failover", "keep-running")
	cmd.MarkFlagsMutuallyExclusive("failover", "exactly-once")
	f.StringVar(&o.kafka, "kafka", "embedded", "the clusters: embedded (kfake inside this process, nothing to download) or real (two single-broker Apache Kafka clusters, JVMs from the jars `make kafka` fetches; about 10 s more)")
	return cmd
}

// recordCount turns --records, --rate and --duration into the number of records to
// produce.
func (o demoOptions) recordCount(recordsSet bool) (int, error) {
	switch {
	case o.rate < 0:
		return 0, fmt.Errorf("--rate must not be negative, got %d", o.rate)
	case o.duration < 0:
		return 0, fmt.Errorf("--duration must not be negative, got %s", o.duration)
	case o.duration > 0 && o.rate == 0:
		return 0, errors.New("--duration needs a --rate above 0: it produces --rate records per second for --duration")
	case o.duration > 0:
		return max(1, int(o.duration.Seconds()*float64(o.rate))), nil
	case recordsSet && o.records < 1:
		return 0, fmt.Errorf("--records must be at least 1, got %d", o.records)
	default:
		return o.records, nil
	}
}
