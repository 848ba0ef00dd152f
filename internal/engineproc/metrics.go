package engineproc

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// FreeLoopbackAddress reserves a loopback port for the engine's metrics endpoint. The
// port is released before the engine binds it; on loopback nothing else races for it in
// practice, and a clash would surface as the engine failing to start, not as bad data.
func FreeLoopbackAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("while reserving a port for the engine's metrics: %w", err)
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

// Metrics are the metric families an engine's /metrics served, by name.
type Metrics map[string]*dto.MetricFamily

// Scrape reads http://address/metrics with client (http.DefaultClient when nil). ctx
// bounds the request: a caller polling the engine sets its own timeout.
func Scrape(ctx context.Context, client *http.Client, address string) (Metrics, error) {
	if client == nil {
		client = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+address+"/metrics", nil)
	if err != nil {
		return nil, fmt.Errorf("while building the metrics request: %w", err)
	}
	// Ask for the text format: ParseMetrics reads it and it is what a person debugging
	// with curl sees.
	req.Header.Set("Accept", "text/plain")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("while scraping the engine's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil, fmt.Errorf("while scraping the engine's metrics: HTTP %s", resp.Status)
	}
	return ParseMetrics(resp.Body)
}

// ParseMetrics reads metrics in the Prometheus text exposition format.
func ParseMetrics(r io.Reader) (Metrics, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("while parsing the engine's metrics: %w", err)
	}
	return Metrics(families), nil
}

// Sum adds up the counter, gauge or untyped family name over its labels (all
// partitions, say); 0 when the engine did not serve it.
func (m Metrics) Sum(name string) float64 {
	var sum float64
	for _, s := range m[name].GetMetric() {
		switch {
		case s.Counter != nil:
			sum += s.GetCounter().GetValue()
		case s.Gauge != nil:
			sum += s.GetGauge().GetValue()
		case s.Untyped != nil:
			sum += s.GetUntyped().GetValue()
		}
	}
	return sum
}
