package engineproc

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

const exposition = `# TYPE kafka_mirror_records_total counter
kafka_mirror_records_total{partition="0",topic="a"} 10
kafka_mirror_records_total{partition="1",topic="a"} 5
# TYPE kafka_mirror_inflight_records gauge
kafka_mirror_inflight_records{partition="0",topic="a"} 3
kafka_mirror_inflight_records{partition="1",topic="a"} 4
# TYPE kafka_mirror_untyped untyped
kafka_mirror_untyped 2
`

func TestMetricsSum(t *testing.T) {
	m, err := ParseMetrics(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		family string
		want   float64
	}{
		"counter over partitions": {family: "kafka_mirror_records_total", want: 15},
		"gauge over partitions":   {family: "kafka_mirror_inflight_records", want: 7},
		"untyped":                 {family: "kafka_mirror_untyped", want: 2},
		"absent family":           {family: "kafka_mirror_commits_total", want: 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := m.Sum(tc.family); got != tc.want {
				t.Errorf("Sum(%s) = %v, want %v", tc.family, got, tc.want)
			}
		})
	}
}

func TestScrape(t *testing.T) {
	addr, err := FreeLoopbackAddress()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("the free address %s could not be bound: %v", addr, err)
	}
	var accept string
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		accept = r.Header.Get("Accept")
		_, _ = w.Write([]byte(exposition))
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: time.Minute}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()

	m, err := Scrape(context.Background(), nil, addr)
	if err != nil {
		t.Fatalf("Scrape: %v", err)
	}
	if got := m.Sum("kafka_mirror_records_total"); got != 15 {
		t.Errorf("records = %v, want 15", got)
	}
	if accept != "text/plain" {
		t.Errorf("Accept = %q, want text/plain (the format ParseMetrics reads)", accept)
	}
	if _, err := Scrape(context.Background(), nil, addr+"0"); err == nil {
		t.Error("Scrape of a bad address succeeded")
	}
}
