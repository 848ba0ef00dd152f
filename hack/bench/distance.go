package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/IBM/sarama"
	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/engineproc"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
)

// The across-regions section (issue 28): the engine, the bare sarama forwarder and a
// franz-go forwarder mirror the same records to a target (or from a source) behind a
// proxy that adds a round trip, in the same run, arm after arm.

// distanceTopic is the topic of the across-regions section, on its own proxied source.
const distanceTopic = "bench.distance"

// The arms of the across-regions section.
const (
	armEngine    = "engine"
	armBaseline  = "baseline"
	armSarama    = "sarama forwarder"
	armFranzGo   = "franz-go forwarder"
	distanceFile = "across-regions"
)

// distanceCase is one network layout: the round trip added in front of the target and
// of the source, and the target's broker count.
type distanceCase struct {
	TargetRTT     time.Duration `json:"targetRoundTrip"`
	SourceRTT     time.Duration `json:"sourceRoundTrip"`
	TargetBrokers int           `json:"targetBrokers"`
}

func (c distanceCase) String() string {
	s := fmt.Sprintf("target %v away, %d broker(s)", c.TargetRTT, c.TargetBrokers)
	if c.SourceRTT > 0 {
		s = fmt.Sprintf("source %v away, target %v away, %d target broker(s)", c.SourceRTT, c.TargetRTT, c.TargetBrokers)
	}
	return s
}

// distanceRun is one arm's run in one case.
type distanceRun struct {
	Arm    string       `json:"arm"`
	Result engineResult `json:"result"`
}

// distanceResult is one case with every arm's runs.
type distanceResult struct {
	Case distanceCase  `json:"case"`
	Runs []distanceRun `json:"runs"`
}

// rate is the median records/s of arm over the case's rounds (0 when it did not run).
func (r distanceResult) rate(arm string) float64 {
	return r.median(arm, func(e engineResult) float64 { return e.Rate.RecordsPerSecond() })
}

func (r distanceResult) startup(arm string) float64 {
	return r.median(arm, func(e engineResult) float64 { return e.StartupSeconds })
}

func (r distanceResult) median(arm string, f func(engineResult) float64) float64 {
	var xs []engineResult
	for _, run := range r.Runs {
		if run.Arm == arm {
			xs = append(xs, run.Result)
		}
	}
	if len(xs) == 0 {
		return 0
	}
	return medianOf(xs, f)
}

// distanceCases are the layouts measured: each target round trip with each target
// broker count, then the source far away and the target near.
func (o options) distanceCases() []distanceCase {
	var out []distanceCase
	if o.distanceTarget {
		for _, n := range o.distanceBrokers {
			for _, rtt := range o.distanceRTTs {
				out = append(out, distanceCase{TargetRTT: rtt, TargetBrokers: n})
			}
		}
	}
	far := o.distanceRTTs[len(o.distanceRTTs)-1]
	switch {
	case far <= 0 || !o.distanceSource:
	case o.distanceTarget:
		out = append(out, distanceCase{SourceRTT: far, TargetBrokers: o.distanceBrokers[len(o.distanceBrokers)-1]})
	default:
		for _, n := range o.distanceBrokers {
			out = append(out, distanceCase{SourceRTT: far, TargetBrokers: n})
		}
	}
	return out
}

// proxyServer is the in-process toxiproxy every proxied cluster registers with.
var proxyServer = sync.OnceValue(func() *toxiproxy.ApiServer {
	// Toxics log through zerolog's global logger, at trace level by default.
	zerolog.SetGlobalLevel(zerolog.WarnLevel)
	return toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
})

// proxiedCluster is a kfake cluster whose brokers are reached only through a toxiproxy
// proxy each: kfake advertises the proxy's address, so a client that bootstraps
// through the proxy stays behind it.
type proxiedCluster struct {
	kf      *kfake.Cluster
	proxies []*toxiproxy.Proxy
}

// advertisedListener is a broker's listener that reports the proxy's address.
type advertisedListener struct {
	net.Listener
	addr net.Addr
}

func (l advertisedListener) Addr() net.Addr { return l.addr }

func startProxiedCluster(name string, brokers int) (*proxiedCluster, error) {
	c := &proxiedCluster{}
	listen := func(network, address string) (net.Listener, error) {
		ln, err := net.Listen(network, address)
		if err != nil {
			return nil, err
		}
		p := toxiproxy.NewProxy(proxyServer(), fmt.Sprintf("%s-%d", name, len(c.proxies)), "127.0.0.1:0", ln.Addr().String())
		if err := p.Start(); err != nil {
			ln.Close()
			return nil, fmt.Errorf("while starting the proxy of %s: %w", name, err)
		}
		c.proxies = append(c.proxies, p)
		addr, err := net.ResolveTCPAddr("tcp", p.Listen)
		if err != nil {
			return nil, err
		}
		return advertisedListener{Listener: ln, addr: addr}, nil
	}
	kf, err := kfake.NewCluster(kfake.NumBrokers(brokers), kfake.ClusterID(name), kfake.ListenFn(listen))
	if err != nil {
		c.close()
		return nil, fmt.Errorf("while starting the %s cluster: %w", name, err)
	}
	c.kf = kf
	return c, nil
}

func (c *proxiedCluster) addrs() []string {
	out := make([]string, 0, len(c.proxies))
	for _, p := range c.proxies {
		out = append(out, p.Listen)
	}
	return out
}

// setRoundTrip makes every byte to and from the cluster take rtt/2 each way (0 removes
// the delay).
func (c *proxiedCluster) setRoundTrip(rtt time.Duration) error {
	for _, p := range c.proxies {
		for _, stream := range []string{"upstream", "downstream"} {
			name := "rtt-" + stream
			_ = p.Toxics.RemoveToxic(context.Background(), name)
			if rtt <= 0 {
				continue
			}
			js := fmt.Sprintf(`{"name":%q,"type":"latency","stream":%q,"attributes":{"latency":%d}}`, name, stream, (rtt / 2).Milliseconds())
			if _, err := p.Toxics.AddToxicJson(strings.NewReader(js)); err != nil {
				return fmt.Errorf("while adding a %v round trip: %w", rtt, err)
			}
		}
	}
	return nil
}

func (c *proxiedCluster) close() {
	for _, p := range c.proxies {
		p.Stop()
	}
	if c.kf != nil {
		c.kf.Close()
	}
}

// endOffsetCounter counts a topic's records with one sharded ListOffsets request per
// poll (franz-go sends each broker its partitions at once), so a far target costs one
// round trip per poll rather than one per partition; the count is dated in the middle
// of that round trip.
type endOffsetCounter struct {
	cl         *kgo.Client
	topic      string
	partitions int32
}

func newEndOffsetCounter(brokers []string, topic string, partitions int32) (*endOffsetCounter, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return nil, fmt.Errorf("while connecting the target counter: %w", err)
	}
	return &endOffsetCounter{cl: cl, topic: topic, partitions: partitions}, nil
}

func (c *endOffsetCounter) count() (int64, time.Time, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	t := kmsg.NewListOffsetsRequestTopic()
	t.Topic = c.topic
	for p := int32(0); p < c.partitions; p++ {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp = p, -1
		t.Partitions = append(t.Partitions, rp)
	}
	req.Topics = append(req.Topics, t)
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, c.cl)
	end := time.Now()
	if err != nil {
		return 0, end, err
	}
	var sum int64
	seen := 0
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			if rp.ErrorCode != 0 {
				return 0, end, fmt.Errorf("while reading the end offset of target %s/%d: error code %d", rt.Topic, rp.Partition, rp.ErrorCode)
			}
			sum += rp.Offset
			seen++
		}
	}
	if seen != int(c.partitions) {
		return 0, end, fmt.Errorf("while reading the end offsets of target %s: %d of %d partitions answered", c.topic, seen, c.partitions)
	}
	return sum, start.Add(end.Sub(start) / 2), nil
}

func (c *endOffsetCounter) close() { c.cl.Close() }

// acrossRegions runs the section: its own proxied source with the distance topic
// preloaded, then every case with every arm, the arms' order shifted case by case.
func (b *bench) acrossRegions(ctx context.Context) ([]distanceResult, error) {
	o := b.o
	src, err := startProxiedCluster("bench-distance-source", o.brokers)
	if err != nil {
		return nil, err
	}
	defer src.close()
	admin, err := kafka.NewClusterAdmin(config.Cluster{BootstrapServers: src.addrs()}, kafka.WithRole(kafka.RoleSource))
	if err != nil {
		return nil, err
	}
	err = admin.CreateTopic(distanceTopic, &sarama.TopicDetail{NumPartitions: int32(o.partitions), ReplicationFactor: -1}, false)
	_ = admin.Close()
	if err != nil {
		return nil, fmt.Errorf("while creating source topic %q: %w", distanceTopic, err)
	}
	gen := newRecordGen(o.distanceValueSize)
	b.logf("Across regions: preloading %d records of %d bytes into %d partitions", o.distanceRecords, o.distanceValueSize, o.partitions)
	if _, err := preload(ctx, src.addrs(), gen, distanceTopic, int32(o.partitions), 0, o.distanceRecords); err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("while locating the benchmark binary: %w", err)
	}
	arms := []struct {
		name string
		bin  []string
	}{
		{armEngine, b.engineBin},
		{armSarama, []string{self, forwarderCommand}},
		{armFranzGo, []string{self, kgoForwarderCommand}},
	}
	if o.baselineBin != "" {
		base, err := filepath.Abs(o.baselineBin)
		if err != nil {
			return nil, err
		}
		arms = append(arms, struct {
			name string
			bin  []string
		}{armBaseline, []string{base}})
	}
	if len(o.distanceArms) > 0 {
		short := map[string]string{armEngine: "engine", armBaseline: "baseline", armSarama: "sarama", armFranzGo: "franz-go"}
		kept := arms[:0]
		for _, a := range arms {
			if slices.Contains(o.distanceArms, short[a.name]) {
				kept = append(kept, a)
			}
		}
		arms = kept
	}
	var out []distanceResult
	shift := 0
	for _, c := range o.distanceCases() {
		res := distanceResult{Case: c}
		if err := src.setRoundTrip(c.SourceRTT); err != nil {
			return nil, err
		}
		for round := 0; round < o.distanceRounds; round++ {
			for j := range arms {
				arm := arms[(shift+j)%len(arms)]
				r, err := b.distanceRun(ctx, src.addrs(), gen, c, arm.name, arm.bin)
				if err != nil {
					return nil, fmt.Errorf("across regions, %s, %s: %w", c, arm.name, err)
				}
				res.Runs = append(res.Runs, distanceRun{Arm: arm.name, Result: r})
			}
			shift++
		}
		b.logf("Across regions, %s: engine %s, sarama forwarder %s, franz-go forwarder %s records/s; first record after %.2f s / %.2f s / %.2f s",
			c, fmtNum(res.rate(armEngine)), fmtNum(res.rate(armSarama)), fmtNum(res.rate(armFranzGo)),
			res.startup(armEngine), res.startup(armSarama), res.startup(armFranzGo))
		out = append(out, res)
	}
	return out, nil
}

// distanceRun mirrors the distance topic into a fresh proxied target with the command
// bin, with the case's round trips, and measures it as engineRun does.
func (b *bench) distanceRun(ctx context.Context, source []string, gen *recordGen, c distanceCase, arm string, bin []string) (engineResult, error) {
	want := b.o.distanceRecords
	res := engineResult{Name: arm, Records: want}
	b.seq++
	name := b.runName("distance-" + strings.ReplaceAll(arm, " ", "-"))
	tgt, err := startProxiedCluster("bench-target-"+name, c.TargetBrokers)
	if err != nil {
		return res, err
	}
	defer tgt.close()
	admin, err := kafka.NewClusterAdmin(config.Cluster{BootstrapServers: tgt.addrs()}, kafka.WithRole(kafka.RoleTarget))
	if err != nil {
		return res, err
	}
	err = admin.CreateTopic(distanceTopic, &sarama.TopicDetail{NumPartitions: int32(b.o.partitions), ReplicationFactor: -1, ConfigEntries: b.o.distanceTopicConfigs}, false)
	_ = admin.Close()
	if err != nil {
		return res, fmt.Errorf("while creating the target topic: %w", err)
	}
	if err := tgt.setRoundTrip(c.TargetRTT); err != nil {
		return res, err
	}
	counter, err := newEndOffsetCounter(tgt.addrs(), distanceTopic, int32(b.o.partitions))
	if err != nil {
		return res, err
	}
	defer counter.close()
	addr, err := engineproc.FreeLoopbackAddress()
	if err != nil {
		return res, err
	}
	spec := engineSpec{name: arm, noDataLoss: true, streams: b.o.streams, maxInFlight: b.o.maxInFlight}
	if arm == armEngine {
		spec.maxInFlightRequests = b.o.engineMaxInFlightRequests
	}
	cfg, err := engineConfig(spec, source, tgt.addrs(), "bench-"+name, distanceTopic, addr)
	if err != nil {
		return res, err
	}
	p, err := startEngine(bin, b.o.engineEnv, b.workDir, name, cfg)
	if err != nil {
		return res, err
	}
	wctx, cancel := context.WithTimeout(ctx, b.runTimeout(want))
	pr, err := waitForRecords(wctx, p, counter, int64(want), false, nil)
	cancel()
	if err != nil {
		stopEngine(p, syscall.SIGKILL, 5*time.Second)
		return res, fmt.Errorf("while waiting for the %s run (log %s): %w", arm, p.LogPath(), err)
	}
	// A drain across the distance only costs time, and this section measures no stop.
	u := stopEngine(p, syscall.SIGKILL, 5*time.Second)
	res.fill(pr, u, int64(gen.recordBytes(0)))
	b.logf("  %s, %s: %s, first record after %.2f s", c, arm, fmtRate(res.Rate), res.StartupSeconds)
	return res, nil
}

// Goals of issue 28 at every round trip and broker count.
const (
	goalToFranzGo      = 0.9 // engine / franz-go forwarder, at least
	goalToSaramaAtDist = 1.0 // engine / sarama forwarder, at least
	goalDistanceStart  = 1.5 // seconds to the first record on the target, at most
)

// writeDistance writes the section's results as across-regions.json and .md in dir.
func writeDistance(dir string, o options, results []distanceResult) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(struct {
		Records    int              `json:"records"`
		ValueSize  int              `json:"valueSize"`
		Partitions int              `json:"partitions"`
		Rounds     int              `json:"rounds"`
		Results    []distanceResult `json:"results"`
	}{o.distanceRecords, o.distanceValueSize, o.partitions, o.distanceRounds, results}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, distanceFile+".json"), append(data, '\n'), 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, distanceFile+".md"))
	if err != nil {
		return err
	}
	writeDistanceMarkdown(f, o, results)
	return f.Close()
}

func writeDistanceMarkdown(w io.Writer, o options, results []distanceResult) {
	fmt.Fprintf(w, "# Across regions\n\nWritten by `make bench` (hack/bench, distance.go). %s records of %d bytes in %d partitions, "+
		"mirrored through toxiproxy latency (half the round trip each way) by each arm in turn, in the same run, a fresh target per run; "+
		"no-data-loss settings in every arm (acks=all, idempotent, order per partition, commit only after the ack). "+
		"Rates are first-to-last record on the target, medians of %d round(s); \"first record\" is from the process's start.\n\n",
		fmtCount(o.distanceRecords), o.distanceValueSize, o.partitions, o.distanceRounds)
	hasBase := false
	for _, r := range results {
		hasBase = hasBase || r.rate(armBaseline) > 0
	}
	head := []string{"layout", "engine rec/s", "sarama forwarder", "franz-go forwarder", "engine / franz-go", "engine / sarama", "first record: engine / sarama / franz-go"}
	if hasBase {
		head = append(head, "baseline engine", "engine / baseline")
	}
	t := [][]string{head}
	ratio := func(a, b float64) string {
		if b == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", a/b)
	}
	for _, r := range results {
		e, s, f := r.rate(armEngine), r.rate(armSarama), r.rate(armFranzGo)
		row := []string{r.Case.String(), fmtNum(e), fmtNum(s), fmtNum(f), ratio(e, f), ratio(e, s),
			fmt.Sprintf("%.2f / %.2f / %.2f s", r.startup(armEngine), r.startup(armSarama), r.startup(armFranzGo))}
		if hasBase {
			row = append(row, fmtNum(r.rate(armBaseline)), ratio(e, r.rate(armBaseline)))
		}
		t = append(t, row)
	}
	writeMarkdownTable(w, t)
	fmt.Fprintf(w, "\nGoals (issue 28): engine >= %.1f x the franz-go forwarder and >= %.1f x the sarama forwarder in every layout; first record <= %.1f s.\n",
		goalToFranzGo, goalToSaramaAtDist, goalDistanceStart)
}
