package demo

import (
	"context"
	"io"
	"net/http"
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
