package demo

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

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

// freeLoopbackAddress reserves a loopback port for the engine's metrics endpoint. The
// port is released before the engine binds it; on loopback nothing else races for it in
// practice, and a clash would surface as the engine failing to start, not as bad data.
func freeLoopbackAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("while reserving a port for the engine's metrics: %w", err)
	}
	addr := l.Addr().String()
	return addr, l.Close()
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

// scrapeMetrics reads and sums the engine's metrics at http://address/metrics.
func scrapeMetrics(ctx context.Context, client *http.Client, address string) (engineMetrics, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+address+"/metrics", nil)
	if err != nil {
		return engineMetrics{}, fmt.Errorf("while building the metrics request: %w", err)
	}
	// Ask for the text format: the parser below reads it and it is what a person
	// debugging with curl sees.
	req.Header.Set("Accept", "text/plain")
	resp, err := client.Do(req)
	if err != nil {
		return engineMetrics{}, fmt.Errorf("while scraping the engine's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return engineMetrics{}, fmt.Errorf("while scraping the engine's metrics: HTTP %s", resp.Status)
	}
	return parseMetrics(resp.Body)
}

// parseMetrics sums the mirror's metric families over their labels.
func parseMetrics(r io.Reader) (engineMetrics, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return engineMetrics{}, fmt.Errorf("while parsing the engine's metrics: %w", err)
	}
	return engineMetrics{
		Records:  sumFamily(families["kafka_mirror_records_total"]),
		Bytes:    sumFamily(families["kafka_mirror_bytes_total"]),
		Filtered: sumFamily(families["kafka_mirror_filtered_records_total"]),
		InFlight: sumFamily(families["kafka_mirror_inflight_records"]),
		Commits:  sumFamily(families["kafka_mirror_commits_total"]),
	}, nil
}

func sumFamily(f *dto.MetricFamily) float64 {
	if f == nil {
		return 0
	}
	var sum float64
	for _, m := range f.GetMetric() {
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Untyped != nil:
			sum += m.GetUntyped().GetValue()
		}
	}
	return sum
}
