package mirror

import (
	"slices"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names, fixed by the design so that dashboards and alerts can be written once.
const (
	metricRecords     = "kafka_mirror_records_total"
	metricBytes       = "kafka_mirror_bytes_total"
	metricFiltered    = "kafka_mirror_filtered_records_total"
	metricSkipped     = "kafka_mirror_skipped_records_total"
	metricInFlight    = "kafka_mirror_inflight_records"
	metricInFlightB   = "kafka_mirror_inflight_bytes"
	metricCommitted   = "kafka_mirror_committed_offset"
	metricLag         = "kafka_mirror_lag_records"
	metricWaiting     = "kafka_mirror_waiting_for_target"
	metricAge         = "kafka_mirror_record_age_seconds"
	metricLatency     = "kafka_mirror_replication_latency_seconds"
	metricSendErrors  = "kafka_mirror_send_errors_total"
	metricCommits     = "kafka_mirror_commits_total"
	metricRebalances  = "kafka_mirror_rebalances_total"
	metricListenerErr = "kafka_mirror_listener_errors_total"
	metricResumed     = "kafka_mirror_resumed_from_target_total"
	metricRecreated   = "kafka_mirror_topic_recreated_total"
	metricLoopDropped = "kafka_mirror_loop_dropped_records_total"
)

// Values of the reason label of metricLoopDropped.
const (
	loopReasonFromTarget = "fromTarget"
	loopReasonMaxHops    = "maxHops"
)

var partitionLabels = []string{"topic", "partition"}

// metrics holds the engine's Prometheus metrics. Per-partition counters, gauges and the
// two histograms are read from partitionState at scrape time (a Collector), so the hot
// path updates plain atomics (durationHistogram for the histograms).
type metrics struct {
	// recordAge and latency describe the per-partition histograms, ageBuckets and
	// latencyBuckets are their buckets.
	recordAge, latency         *prometheus.Desc
	ageBuckets, latencyBuckets *durationBuckets
	sendErrors                 prometheus.Counter
	commits                    prometheus.Counter
	rebalances                 prometheus.Counter
	// listenerErrors counts failures of the rebalance listener (errors, panics, calls
	// past the listener timeout), which the handler package contains and never returns.
	listenerErrors prometheus.Counter

	records, bytes, filtered, skipped, inFlight, committed, lag, waiting, resumed, recreated *prometheus.Desc
	// loopDropped is labelled by reason too (loopReason*).
	loopDropped *prometheus.Desc
}

func newMetrics() *metrics {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(name, help, partitionLabels, nil)
	}
	return &metrics{
		recordAge: d(metricAge, "Time from a source record's timestamp to the target's ack of its copy."),
		latency:   d(metricLatency, "Time from reading a source record to the target's ack of its copy."),
		// Record age spans seconds (live mirroring) to days (catching up a backlog).
		ageBuckets:     newDurationBuckets(prometheus.ExponentialBuckets(0.005, 4, 14)),
		latencyBuckets: newDurationBuckets(prometheus.ExponentialBuckets(0.001, 2, 16)),
		sendErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: metricSendErrors, Help: "Records whose send to the target finally failed.",
		}),
		commits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: metricCommits, Help: "Offset commits the source group coordinator confirmed.",
		}),
		rebalances: prometheus.NewCounter(prometheus.CounterOpts{
			Name: metricRebalances, Help: "Consumer-group sessions started by this process's streams.",
		}),
		listenerErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: metricListenerErr, Help: "Rebalance listener calls that failed, panicked or ran past the listener timeout.",
		}),
		records:   d(metricRecords, "Records written to the target and acked, by source partition."),
		bytes:     d(metricBytes, "Key and value bytes of acked records, by source partition."),
		filtered:  d(metricFiltered, "Source records dropped by the handler chain."),
		skipped:   d(metricSkipped, "Source records dropped because a handler failed under onError: skip."),
		inFlight:  d(metricInFlight, "Source records read and not yet acked by the target."),
		committed: d(metricCommitted, "Last source offset committed (the next offset to read)."),
		lag:       d(metricLag, "Source high watermark minus the committed offset."),
		waiting:   d(metricWaiting, "1 while the partition waits for its target topic to exist or grow."),
		resumed:   d(metricResumed, "Assignments that started from the target-side progress because the source group had no offset."),
		recreated: d(metricRecreated, "Assignments that found the source topic deleted and created again (a new topic ID) and started at its beginning."),
		loopDropped: prometheus.NewDesc(metricLoopDropped,
			"Source records dropped by loop prevention (provenance): reason fromTarget (they came from the target cluster) or maxHops.",
			append(slices.Clone(partitionLabels), "reason"), nil),
	}
}

func (m *metrics) register(r prometheus.Registerer, parts *partitionRegistry, budget *inFlightBudget) error {
	for _, c := range []prometheus.Collector{
		m.sendErrors, m.commits, m.rebalances, m.listenerErrors,
		&partitionCollector{m: m, parts: parts},
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: metricInFlightB,
			Help: "Bytes (key, value, headers) of records handed to the producer and not yet acked: the part of maxInFlightBytes in use.",
		}, func() float64 { used, _ := budget.usage(); return float64(used) }),
	} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// partitionCollector turns partition states into metrics at scrape time.
type partitionCollector struct {
	m     *metrics
	parts *partitionRegistry
}

// Describe sends the per-partition descriptors.
func (c *partitionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.m.records, c.m.bytes, c.m.filtered, c.m.skipped,
		c.m.inFlight, c.m.committed, c.m.lag, c.m.waiting, c.m.resumed, c.m.recreated, c.m.loopDropped,
		c.m.recordAge, c.m.latency} {
		ch <- d
	}
}

// Collect reads every partition's state.
func (c *partitionCollector) Collect(ch chan<- prometheus.Metric) {
	for _, p := range c.parts.all() {
		s := p.snapshot()
		lv := []string{s.Topic, strconv.Itoa(int(s.Partition))}
		counter := func(d *prometheus.Desc, v int64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), lv...)
		}
		gauge := func(d *prometheus.Desc, v int64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), lv...)
		}
		counter(c.m.records, s.Records)
		counter(c.m.bytes, s.Bytes)
		counter(c.m.filtered, s.Filtered)
		counter(c.m.skipped, s.Skipped)
		counter(c.m.resumed, s.ResumedFromTarget)
		counter(c.m.recreated, s.Recreated)
		if s.LoopFromTarget+s.LoopOverHops > 0 {
			ch <- prometheus.MustNewConstMetric(c.m.loopDropped, prometheus.CounterValue, float64(s.LoopFromTarget), s.Topic, lv[1], loopReasonFromTarget)
			ch <- prometheus.MustNewConstMetric(c.m.loopDropped, prometheus.CounterValue, float64(s.LoopOverHops), s.Topic, lv[1], loopReasonMaxHops)
		}
		gauge(c.m.inFlight, s.InFlight)
		gauge(c.m.waiting, map[bool]int64{false: 0, true: 1}[s.WaitingForTarget])
		if s.Committed >= 0 {
			gauge(c.m.committed, s.Committed)
		}
		if s.Assigned && s.HighWatermark >= 0 && s.Committed >= 0 {
			gauge(c.m.lag, s.Lag)
		}
		ch <- p.age.metric(c.m.recordAge, c.m.ageBuckets, lv...)
		ch <- p.latency.metric(c.m.latency, c.m.latencyBuckets, lv...)
	}
}
