package mirror

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// TestMissingTargetTopicWaits runs with syncTopics off against a target that allows
// auto-creation: one selected topic exists on the target, the other does not. The
// engine must not create it (no produce or metadata request may auto-create), the
// partitions of the missing topic wait (visible in Stats and metrics) while the other
// topic is mirrored, and once the topic is created the waiting partitions resume.
func TestMissingTargetTopicWaits(t *testing.T) {
	const partitions = 2
	c := newClusters(t, partitions, kfake.AllowAutoTopicCreation(), kfake.SeedTopics(partitions, testTopic))
	adminSrc := sourceAdmin(t, c)
	if err := adminSrc.CreateTopic("payments", &sarameTopicDetail2, false); err != nil {
		t.Fatal(err)
	}
	w := newWorkload(partitions)
	w.produce(t, c.source, 500)
	producePlain(t, c.source, "payments", 2, 300)

	cfg := c.testConfig(t, func(cfg *config.Config) {
		cfg.SyncTopics = config.BoolPtr(false)
		cfg.Topics.Include = []string{testTopic, "payments"}
		cfg.Metrics.Address = "127.0.0.1:0"
	})
	r := startEngine(t, cfg, testLogger(t))

	got := readTarget(t, c.target, testTopic, w.total(), time.Second, 30*time.Second)
	if res := audit(t, w, got, true, true); res.missing != 0 || res.duplicates != 0 {
		t.Fatalf("the existing topic was not mirrored fully while the other waited: %+v", res)
	}
	testutil.WaitFor(t, 90*time.Second, "payments partitions waiting", func() bool {
		n := 0
		for _, p := range r.e.Stats().Partitions {
			if p.Topic == "payments" && p.WaitingForTarget {
				n++
			}
		}
		return n == 2
	})
	topics, err := targetAdmin(t, c).ListTopics()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := topics["payments"]; ok {
		t.Fatal("the engine auto-created target topic payments")
	}

	if err := targetAdmin(t, c).CreateTopic("payments", &sarameTopicDetail2, false); err != nil {
		t.Fatal(err)
	}
	paid := readTarget(t, c.target, "payments", 600, time.Second, 30*time.Second)
	if n := len(paid[0]) + len(paid[1]); n != 600 {
		t.Fatalf("payments holds %d records on the target, want 600", n)
	}
	for _, p := range r.e.Stats().Partitions {
		if p.WaitingForTarget {
			t.Fatalf("partition %s/%d still waiting after its target was created", p.Topic, p.Partition)
		}
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestMetricsAndHealthEndpoints scrapes /metrics, /healthz and /readyz of a running
// engine and checks the fixed metric names and values.
func TestMetricsAndHealthEndpoints(t *testing.T) {
	const partitions = 2
	c := newClusters(t, partitions)
	w := newWorkload(partitions)
	w.produce(t, c.source, 1000)
	cfg := c.testConfig(t, func(cfg *config.Config) { cfg.Metrics.Address = "127.0.0.1:0" })
	r := startEngine(t, cfg, testLogger(t))
	testutil.WaitFor(t, 60*time.Second, "all records committed and every stream joined", func() bool {
		s := r.e.Stats()
		return s.Ready && s.Records == 2000 && len(s.Partitions) == 2 && s.Partitions[0].Committed == 1000 && s.Partitions[1].Committed == 1000
	})
	base := "http://" + r.e.httpAddr()
	if code, body := get(t, base+"/healthz"); code != 200 || strings.TrimSpace(body) != "ok" {
		t.Fatalf("/healthz = %d %q", code, body)
	}
	if code, body := get(t, base+"/readyz"); code != 200 {
		t.Fatalf("/readyz = %d %q", code, body)
	}
	_, metrics := get(t, base+"/metrics")
	for _, want := range []string{
		`kafka_mirror_records_total{partition="0",topic="orders"} 1000`,
		`kafka_mirror_records_total{partition="1",topic="orders"} 1000`,
		`kafka_mirror_committed_offset{partition="1",topic="orders"} 1000`,
		`kafka_mirror_lag_records{partition="0",topic="orders"} 0`,
		`kafka_mirror_inflight_records{partition="0",topic="orders"} 0`,
		`kafka_mirror_filtered_records_total{partition="0",topic="orders"} 0`,
		`kafka_mirror_record_age_seconds_count{partition="0",topic="orders"} 1000`,
		`kafka_mirror_replication_latency_seconds_count{partition="1",topic="orders"} 1000`,
		`kafka_mirror_send_errors_total 0`,
		`kafka_mirror_rebalances_total `,
		`kafka_mirror_commits_total `,
		`kafka_mirror_bytes_total{partition="0",topic="orders"} `,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

// TestHandlerFilterCounts runs a CEL filter that drops records with a "skip" header:
// dropped records are counted as filtered and still committed, the rest are mirrored.
func TestHandlerFilterCounts(t *testing.T) {
	c := newClusters(t, 1)
	recs := 1000
	produceWithSkip(t, c.source, recs)
	cfg := c.testConfig(t, func(cfg *config.Config) {
		cfg.Handlers = []config.HandlerSpec{{CEL: &config.CELHandler{Filter: "!('skip' in record.headers)"}}}
	})
	r := startEngine(t, cfg, testLogger(t))
	got := readTarget(t, c.target, testTopic, recs-recs/4, time.Second, 30*time.Second)
	if n := len(got[0]); n != recs-recs/4 {
		t.Fatalf("target holds %d records, want %d", n, recs-recs/4)
	}
	for _, rec := range got[0] {
		for _, h := range rec.Headers {
			if h.Key == "skip" {
				t.Fatalf("record at target offset %d has the skip header", rec.Offset)
			}
		}
	}
	testutil.WaitFor(t, 90*time.Second, "everything committed", func() bool {
		s := r.e.Stats()
		return len(s.Partitions) == 1 && s.Partitions[0].Committed == int64(recs)
	})
	if s := r.e.Stats(); s.Filtered != int64(recs/4) || s.Records != int64(recs-recs/4) {
		t.Fatalf("stats: filtered %d, records %d; want %d, %d", s.Filtered, s.Records, recs/4, recs-recs/4)
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
