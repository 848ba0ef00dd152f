package demo

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/engineproc"
)

// EngineCommand returns the command that runs `kafka-mirror` with args (for example
// "run", "--config", path). The CLI re-executes its own binary; a test can point it at a
// test binary that behaves as the CLI.
type EngineCommand func(args ...string) *exec.Cmd

// startEngine starts `kafka-mirror run --config configPath`, appending its output to log.
func startEngine(command EngineCommand, configPath string, log io.Writer) (*engineproc.Process, error) {
	cmd := command("run", "--config", configPath, "--log-format", "console", "--log-level", "info")
	return engineproc.Start(cmd, engineproc.Options{Output: log})
}

// engineMetrics is what the demo reads from the engine's Prometheus endpoint: the same
// numbers a dashboard would show.
type engineMetrics struct {
	Records  float64 // kafka_mirror_records_total, summed over partitions
	Bytes    float64 // kafka_mirror_bytes_total
	Filtered float64 // kafka_mirror_filtered_records_total
	InFlight float64 // kafka_mirror_inflight_records
	Commits  float64 // kafka_mirror_commits_total
}

// metricsTimeout bounds one scrape: the progress view redraws every second.
const metricsTimeout = time.Second

// scrapeMetrics reads and sums the engine's metrics at http://address/metrics.
func scrapeMetrics(ctx context.Context, client *http.Client, address string) (engineMetrics, error) {
	ctx, cancel := context.WithTimeout(ctx, metricsTimeout)
	defer cancel()
	m, err := engineproc.Scrape(ctx, client, address)
	if err != nil {
		return engineMetrics{}, err
	}
	return sumMetrics(m), nil
}

// parseMetrics sums the mirror's metric families in the text format over their labels.
func parseMetrics(r io.Reader) (engineMetrics, error) {
	m, err := engineproc.ParseMetrics(r)
	if err != nil {
		return engineMetrics{}, err
	}
	return sumMetrics(m), nil
}

// sumMetrics sums the mirror's metric families over their labels.
func sumMetrics(m engineproc.Metrics) engineMetrics {
	return engineMetrics{
		Records:  m.Sum("kafka_mirror_records_total"),
		Bytes:    m.Sum("kafka_mirror_bytes_total"),
		Filtered: m.Sum("kafka_mirror_filtered_records_total"),
		InFlight: m.Sum("kafka_mirror_inflight_records"),
		Commits:  m.Sum("kafka_mirror_commits_total"),
	}
}

// scene is how a multi-process scene (active-active, failover) starts: its clock, its
// timestamped lines on out, and its work directory: opts.WorkDir, or a temporary one
// that finish removes after a run that passed and keeps, and names, after one that did
// not.
type scene struct {
	start time.Time
	out   io.Writer
	dir   string
	temp  bool
}

func newScene(opts Options, prefix string) (*scene, error) {
	sc := &scene{start: time.Now(), out: opts.Out, dir: opts.WorkDir}
	if sc.dir == "" {
		dir, err := os.MkdirTemp("", prefix)
		if err != nil {
			return nil, fmt.Errorf("while creating the demo's work directory: %w", err)
		}
		sc.dir, sc.temp = dir, true
	}
	return sc, nil
}

// say prints a line stamped with the time since the scene started.
func (sc *scene) say(format string, args ...any) {
	fmt.Fprintf(sc.out, "[%5.1fs] %s\n", time.Since(sc.start).Seconds(), fmt.Sprintf(format, args...))
}

// finish removes a temporary work directory after a run that passed; after one that
// did not, it keeps it and says where.
func (sc *scene) finish(passed bool) {
	if !sc.temp {
		return
	}
	if passed {
		_ = os.RemoveAll(sc.dir)
		return
	}
	fmt.Fprintf(sc.out, "The engines' configs and logs are kept in %s (remove it when done).\n", sc.dir)
}
