package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/engineproc"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// latencyResult is the replication latency at a fixed moderate rate.
type latencyResult struct {
	Rate    int     `json:"recordsPerSecond"`
	Records int     `json:"records"`
	P50Ms   float64 `json:"p50Ms"`
	P90Ms   float64 `json:"p90Ms"`
	P99Ms   float64 `json:"p99Ms"`
	MaxMs   float64 `json:"maxMs"`
	// EngineP50Ms and EngineP99Ms come from the engine's own histogram (read to ack),
	// -1 when it does not export one.
	EngineP50Ms float64 `json:"engineP50Ms"`
	EngineP99Ms float64 `json:"engineP99Ms"`
}

// warmup is how long the probe keeps producing after the first record came through
// before it starts timing: the engine has then joined its group and caught up.
const warmup = 2 * time.Second

// latency runs the engine on the (empty) latency topic, writes records to the source at
// --latency-rate, each stamped with its send time in a header, reads them back from the
// target and times each from send to read. That is the latency a consumer of the
// target sees: source produce, engine fetch, target produce and ack, target fetch.
func (b *bench) latency(ctx context.Context) (latencyResult, error) {
	return b.latencyOf(ctx, engineSpec{name: "latency", noDataLoss: true, streams: b.o.streams, maxInFlight: b.o.maxInFlight})
}

// latencyOf is latency for the engine spec; with delivery exactlyOnce the probe reads
// read_committed, as a consumer of that mode's guarantee does.
func (b *bench) latencyOf(ctx context.Context, spec engineSpec) (latencyResult, error) {
	res := latencyResult{Rate: b.o.latencyRate, EngineP50Ms: -1, EngineP99Ms: -1}
	err := b.withTarget(ctx, spec.name, 0, latencyTopic, func(target []string) error {
		p, addr, err := b.launch(b.engineBin, spec, spec.name, latencyTopic, target)
		if err != nil {
			return err
		}
		if err := p.WaitReady(ctx, addr, 30*time.Second); err != nil {
			stopEngine(p, syscall.SIGKILL, 5*time.Second)
			return err
		}
		lat, err := b.probe(ctx, p, target, spec.delivery == config.DeliveryExactlyOnce)
		if err != nil {
			stopEngine(p, syscall.SIGKILL, 5*time.Second)
			return err
		}
		if fams, err := scrape(ctx, addr); err == nil {
			if h := fams["kafka_mirror_replication_latency_seconds"]; h != nil {
				res.EngineP50Ms = histogramQuantile(h, 0.5) * 1000
				res.EngineP99Ms = histogramQuantile(h, 0.99) * 1000
			}
		}
		if u := stopEngine(p, syscall.SIGTERM, time.Minute); u.ExitErr != nil {
			return fmt.Errorf("the %s engine did not stop cleanly: %w; last log lines:\n%s", spec.name, u.ExitErr, p.LogTail(logTailLines))
		}
		res.Records = len(lat)
		res.P50Ms = percentile(lat, 0.50)
		res.P90Ms = percentile(lat, 0.90)
		res.P99Ms = percentile(lat, 0.99)
		res.MaxMs = percentile(lat, 1)
		return nil
	})
	if err == nil {
		b.logf("  %s at %d records/s: p50 %.1f ms, p99 %.1f ms, max %.1f ms (engine histogram p50 %.1f ms, p99 %.1f ms)",
			spec.name, res.Rate, res.P50Ms, res.P99Ms, res.MaxMs, res.EngineP50Ms, res.EngineP99Ms)
	}
	return res, err
}

// probe produces at the configured rate and returns the latencies, in milliseconds, of
// the records sent after the warm-up; readCommitted reads the target read_committed.
func (b *bench) probe(ctx context.Context, p *engineproc.Process, target []string, readCommitted bool) ([]float64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	prod, err := kgo.NewClient(
		kgo.SeedBrokers(b.srcBrokers...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.ProducerLinger(0),
	)
	if err != nil {
		return nil, fmt.Errorf("while creating the latency producer: %w", err)
	}
	defer prod.Close()
	isolation := kgo.ReadUncommitted()
	if readCommitted {
		isolation = kgo.ReadCommitted()
	}
	reader, err := kgo.NewClient(
		kgo.SeedBrokers(target...),
		kgo.ConsumeTopics(latencyTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.FetchIsolationLevel(isolation),
	)
	if err != nil {
		return nil, fmt.Errorf("while creating the latency reader: %w", err)
	}
	defer reader.Close()

	var (
		firstSeen    = make(chan struct{})
		firstOnce    sync.Once
		measureFrom  atomic.Int64 // first timed sequence number; MaxInt64 during warm-up
		measureUntil atomic.Int64 // one past the last timed sequence number, once known
		mu           sync.Mutex
		lat          []float64
		got          atomic.Int64
		allIn        = make(chan struct{})
		allOnce      sync.Once
	)
	measureFrom.Store(math.MaxInt64)
	measureUntil.Store(math.MaxInt64)
	go func() {
		for ctx.Err() == nil {
			fs := reader.PollFetches(ctx)
			now := time.Now()
			fs.EachRecord(func(r *kgo.Record) {
				firstOnce.Do(func() { close(firstSeen) })
				seq, sent, ok := probeHeaders(r)
				if !ok || seq < measureFrom.Load() {
					return
				}
				mu.Lock()
				lat = append(lat, float64(now.UnixNano()-sent)/1e6)
				mu.Unlock()
				if n := got.Add(1); n >= measureUntil.Load()-measureFrom.Load() {
					allOnce.Do(func() { close(allIn) })
				}
			})
		}
	}()

	interval := time.Second / time.Duration(b.o.latencyRate)
	start := time.Now()
	var timedStart time.Time
	parts := int32(b.o.partitions)
	for seq := int64(0); ; seq++ {
		if d := time.Until(start.Add(time.Duration(seq) * interval)); d > 0 {
			time.Sleep(d)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-p.Done():
			return nil, p.ExitedError()
		case <-firstSeen:
			if timedStart.IsZero() {
				timedStart = time.Now().Add(warmup)
			} else if measureFrom.Load() == math.MaxInt64 && time.Now().After(timedStart) {
				measureFrom.Store(seq)
			}
		default:
			if time.Since(start) > 30*time.Second {
				return nil, fmt.Errorf("no record came through the engine within 30 s (log %s)", p.LogPath())
			}
		}
		if from := measureFrom.Load(); from != math.MaxInt64 && time.Since(timedStart) >= b.o.latencyTime {
			measureUntil.Store(seq)
			if got.Load() >= seq-from {
				allOnce.Do(func() { close(allIn) })
			}
			break
		}
		r := b.gen.kgoRecord(latencyTopic, parts, int(seq))
		r.Headers = append(r.Headers, kgo.RecordHeader{Key: headerSent, Value: binary.BigEndian.AppendUint64(nil, uint64(time.Now().UnixNano()))})
		prod.Produce(ctx, r, nil)
	}
	select {
	case <-allIn:
	case <-time.After(30 * time.Second):
		return nil, fmt.Errorf("only %d of %d timed records reached the target within 30 s", got.Load(), measureUntil.Load()-measureFrom.Load())
	}
	cancel()
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(lat), nil
}

// probeHeaders reads the sequence number and send time of a probe record.
func probeHeaders(r *kgo.Record) (seq, sent int64, ok bool) {
	var haveSeq, haveSent bool
	for _, h := range r.Headers {
		if len(h.Value) != 8 {
			continue
		}
		switch h.Key {
		case headerSeq:
			seq, haveSeq = int64(binary.BigEndian.Uint64(h.Value)), true
		case headerSent:
			sent, haveSent = int64(binary.BigEndian.Uint64(h.Value)), true
		}
	}
	return seq, sent, haveSeq && haveSent
}

// percentile returns the q-quantile of vs by the nearest-rank method (q = 1 is the
// maximum); 0 for none.
func percentile(vs []float64, q float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(0, min(i, len(s)-1))]
}

// histogramQuantile estimates the q-quantile of a histogram family, merged over its
// labels, by linear interpolation inside the bucket that holds it, as Prometheus's
// histogram_quantile does.
func histogramQuantile(f *dto.MetricFamily, q float64) float64 {
	bounds := map[float64]uint64{}
	var total uint64
	for _, m := range f.GetMetric() {
		h := m.GetHistogram()
		if h == nil {
			continue
		}
		total += h.GetSampleCount()
		for _, b := range h.GetBucket() {
			bounds[b.GetUpperBound()] += b.GetCumulativeCount()
		}
	}
	if total == 0 {
		return 0
	}
	les := make([]float64, 0, len(bounds))
	for le := range bounds {
		les = append(les, le)
	}
	slices.Sort(les)
	rank := q * float64(total)
	lower, below := 0.0, uint64(0)
	for _, le := range les {
		c := bounds[le]
		if float64(c) >= rank {
			if math.IsInf(le, 1) || c == below {
				return lower
			}
			return lower + (le-lower)*(rank-float64(below))/float64(c-below)
		}
		lower, below = le, c
	}
	return lower
}
