package mirror

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

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

// TestRouterChecksEachTargetOnce routes every source record to one of two target
// topics by its offset: the target must hold each record once in its topic, and the
// engine must have asked whether a target topic is ready about once per claim and
// topic, not once per record (the per-claim cache holds every topic it found ready).
func TestRouterChecksEachTargetOnce(t *testing.T) {
	const (
		partitions   = 2
		perPartition = 1000
	)
	c := newClusters(t, partitions, kfake.SeedTopics(partitions, "orders.even", "orders.odd"))
	producePlain(t, c.source, testTopic, partitions, perPartition)
	cfg := c.testConfig(t, func(cfg *config.Config) {
		cfg.SyncTopics = config.BoolPtr(false)
		cfg.Handlers = []config.HandlerSpec{{CEL: &config.CELHandler{Transform: &config.CELTransform{
			Topic: "record.offset % 2 == 0 ? 'orders.even' : 'orders.odd'",
		}}}}
	})
	r := startEngine(t, cfg, testLogger(t))
	for _, topic := range []string{"orders.even", "orders.odd"} {
		got := readTarget(t, c.target, topic, partitions*perPartition/2, time.Second, 30*time.Second)
		for p := int32(0); p < partitions; p++ {
			if n := len(got[p]); n != perPartition/2 {
				t.Fatalf("%s/%d holds %d records, want %d", topic, p, n, perPartition/2)
			}
			for i, rec := range got[p] {
				if want := strconv.Itoa(2*i + map[string]int{"orders.even": 0, "orders.odd": 1}[topic]); string(rec.Value) != want {
					t.Fatalf("%s/%d offset %d holds %q, want %q", topic, p, i, rec.Value, want)
				}
			}
		}
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	// Each of the 2 claims needs each of the 2 topics once; a retry or a session
	// restart may add a few, a check per record would be 2000.
	const ceiling = 2 * 2 * 3
	checks, refreshes := r.e.sender.targets.checks.Load(), r.e.sender.targets.refreshes.Load()
	if checks > ceiling || refreshes > checks {
		t.Fatalf("targets.check was called %d times (%d producer refreshes) for %d records, want at most %d",
			checks, refreshes, partitions*perPartition, ceiling)
	}
	t.Logf("%d records routed to 2 topics with %d readiness checks and %d producer metadata refreshes",
		partitions*perPartition, checks, refreshes)
}

// TestLeaderlessUnrelatedTopicDoesNotDelayStart gives the target an unrelated topic
// whose partition has no leader (kfake answers LEADER_NOT_AVAILABLE for it in every
// metadata response) and a deliveryTimeout of 60 s. The producer keeps looking for
// leaders that long, but only for the topics it writes to: the first records must be
// mirrored well before deliveryTimeout (the ceiling is a third of it; it takes about a
// second).
func TestLeaderlessUnrelatedTopicDoesNotDelayStart(t *testing.T) {
	const (
		partitions      = 2
		deliveryTimeout = 60 * time.Second
	)
	c := newClusters(t, partitions, kfake.SeedTopics(1, "unrelated"))
	c.target.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Metadata}, Topic: "unrelated", Partitions: []int32{0},
		Err: kerr.LeaderNotAvailable, Count: -1})
	w := newWorkload(partitions)
	w.produce(t, c.source, 100)
	cfg := c.testConfig(t, func(cfg *config.Config) { cfg.DeliveryTimeout.Duration = deliveryTimeout })
	start := time.Now()
	r := startEngine(t, cfg, testLogger(t))
	testutil.WaitFor(t, deliveryTimeout/3, "the first records mirrored", func() bool { return r.e.Stats().Records > 0 })
	first := time.Since(start)
	got := readTarget(t, c.target, testTopic, w.total(), time.Second, deliveryTimeout/3)
	if res := audit(t, w, got, true, true); res.missing != 0 || res.duplicates != 0 || res.records != w.total() {
		t.Fatalf("with a leaderless unrelated target topic: %+v, want %d records, 0 missing, 0 duplicates", res, w.total())
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	t.Logf("first record mirrored %v after start with a leaderless unrelated target topic (deliveryTimeout %v)",
		first.Round(time.Millisecond), deliveryTimeout)
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
