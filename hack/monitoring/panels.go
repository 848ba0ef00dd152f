package main

// Selectors every panel uses; the dashboard variables fill them in. The mirror's name is
// the app_kubernetes_io_instance label that the chart's mirror ServiceMonitor copies from
// the metrics Service (docs/metrics.md, "Scraping").
const (
	selMirror    = `namespace=~"$namespace", app_kubernetes_io_instance=~"$mirror"`
	selPartition = selMirror + `, topic=~"$topic"`
	byMirror     = `namespace, app_kubernetes_io_instance`
	byTopic      = byMirror + `, topic`
)

// panelKind is the Grafana visualisation of a panel.
type panelKind int

const (
	kindTimeSeries panelKind = iota
	kindStat
)

// query is one PromQL expression of a panel and its legend.
type query struct {
	Expr, Legend string
}

// panel is one dashboard panel, independent of the Grafana SDK so that the tests and the
// preview read the same expressions the dashboard holds.
type panel struct {
	Title, Description, Unit string
	Kind                     panelKind
	// Signed panels may go below zero (a trend); the others start their axis at 0.
	Signed  bool
	Queries []query
}

// row is a titled group of panels.
type row struct {
	Title  string
	Panels []panel
}

// kubeStateMetrics are the metrics the dashboard and rules take from kube-state-metrics,
// not from kafka-mirror: the live-scrape test cannot see them and checks only that no
// other foreign name slips in.
var kubeStateMetrics = map[string]bool{
	"kube_pod_container_status_restarts_total":    true,
	"kube_deployment_status_replicas_unavailable": true,
	"kube_deployment_spec_replicas":               true,
}

// scrapeTargetLabels are added by Prometheus (the Prometheus Operator's ServiceMonitor
// relabelling) rather than exported by the process, so a scrape does not show them.
var scrapeTargetLabels = map[string]bool{
	"namespace": true, "app_kubernetes_io_instance": true, "pod": true, "service": true,
	"job": true, "instance": true, "container": true, "deployment": true,
}

// Legends: a series by topic is named by its topic, with the mirror as a qualifier that
// says it is one, so that a mirror named after its topic (a common choice) reads
// "orders (mirror orders)", not "orders orders".
const (
	legendTopic  = "{{topic}} (mirror {{app_kubernetes_io_instance}})"
	legendMirror = "mirror {{app_kubernetes_io_instance}}"
)

// catchUpFloor is the least share of the commit point's advance that must go to
// shrinking the lag for a catch-up time to be shown. Below it the estimate is more than
// ten times as long as reading the backlog takes, and mostly the noise of the slope
// (the lag rises and falls with every commit, and by the same amount the slope of a
// steady mirror wobbles around 0): the preview showed 225,000 s for a mirror that was
// caught up. A mirror that does not shrink its lag shows nothing; the lag trend panel
// and the alerts (KafkaMirrorLagGrowing, KafkaMirrorNotCommitting) say why.
const catchUpFloor = "0.1"

// catchUp is the time to catch up, summed by the labels in by ("" for all): the lag
// divided by how fast it shrinks over 15 minutes, only where that rate is above 0 and
// above catchUpFloor times the rate at which the commit point advances.
func catchUp(by string) string {
	sum := "sum"
	if by != "" {
		sum = "sum by (" + by + ")"
	}
	return sum + ` (kafka_mirror_lag_records{` + selPartition + `}) / ((-` + sum + ` (deriv(kafka_mirror_lag_records{` + selPartition + `}[15m])) > ` +
		catchUpFloor + ` * ` + sum + ` (deriv(kafka_mirror_committed_offset{` + selPartition + `}[15m]))) > 0)`
}

func percentiles(metric string) []query {
	var qs []query
	for _, q := range []struct{ quantile, name string }{{"0.5", "p50"}, {"0.9", "p90"}, {"0.99", "p99"}} {
		qs = append(qs, query{
			Expr:   `histogram_quantile(` + q.quantile + `, sum by (le, ` + byMirror + `) (rate(` + metric + `_bucket{` + selPartition + `}[$__rate_interval])))`,
			Legend: q.name + ", " + legendMirror,
		})
	}
	return qs
}

// dashboardRows are the panels of the dashboard, top to bottom.
var dashboardRows = []row{
	{Title: "Overview", Panels: []panel{
		{Title: "Records/s", Kind: kindStat, Unit: "rps", Description: "Records written to the target and acknowledged, per second.",
			Queries: []query{{Expr: `sum(rate(kafka_mirror_records_total{` + selPartition + `}[$__rate_interval]))`}}},
		{Title: "Lag (records)", Kind: kindStat, Unit: "short", Description: "Source records not yet committed as mirrored, summed over the selected partitions.",
			Queries: []query{{Expr: `sum(kafka_mirror_lag_records{` + selPartition + `})`}}},
		{Title: "Time to catch up", Kind: kindStat, Unit: "s", Description: "Lag divided by the rate at which it shrinks (15 minutes); empty while it shrinks by less than a tenth of the rate the commit point advances (no real progress: see the lag trend and the alerts).",
			Queries: []query{{Expr: catchUp("")}}},
		{Title: "Send errors (1h)", Kind: kindStat, Unit: "short", Description: "Records whose send to the target finally failed; each stops the engine.",
			Queries: []query{{Expr: `sum(increase(kafka_mirror_send_errors_total{` + selMirror + `}[1h]))`}}},
	}},
	{Title: "Throughput", Panels: []panel{
		{Title: "Records/s by topic", Unit: "rps", Description: "Acknowledged records per second, by source topic.",
			Queries: []query{{Expr: `sum by (` + byTopic + `) (rate(kafka_mirror_records_total{` + selPartition + `}[$__rate_interval]))`, Legend: legendTopic}}},
		{Title: "Bytes/s by topic", Unit: "Bps", Description: "Key and value bytes of acknowledged records per second, by source topic.",
			Queries: []query{{Expr: `sum by (` + byTopic + `) (rate(kafka_mirror_bytes_total{` + selPartition + `}[$__rate_interval]))`, Legend: legendTopic}}},
		{Title: "Handler drops", Unit: "rps", Description: "Records dropped on purpose by the handler chain (filtered) and records dropped because a handler failed under onError: skip (skipped).",
			Queries: []query{
				{Expr: `sum by (` + byTopic + `) (rate(kafka_mirror_filtered_records_total{` + selPartition + `}[$__rate_interval]))`, Legend: "filtered: " + legendTopic},
				{Expr: `sum by (` + byTopic + `) (rate(kafka_mirror_skipped_records_total{` + selPartition + `}[$__rate_interval]))`, Legend: "skipped: " + legendTopic},
			}},
	}},
	{Title: "Lag", Panels: []panel{
		{Title: "Lag per partition", Unit: "short", Description: "Source high watermark minus the committed offset, per source partition (summed across pods: after a rebalance a partition moves).",
			Queries: []query{{Expr: `sum by (` + byTopic + `, partition) (kafka_mirror_lag_records{` + selPartition + `})`, Legend: "{{topic}}/{{partition}} (mirror {{app_kubernetes_io_instance}})"}}},
		{Title: "Lag trend", Unit: "short", Signed: true, Description: "Change of the lag per second over 15 minutes, by topic: above 0 the mirror falls behind.",
			Queries: []query{{Expr: `sum by (` + byTopic + `) (deriv(kafka_mirror_lag_records{` + selPartition + `}[15m]))`, Legend: legendTopic}}},
		{Title: "Time to catch up by topic", Unit: "s", Description: "Lag divided by the rate it shrinks over 15 minutes; no line while it shrinks by less than a tenth of the rate the commit point advances (no real progress: see the lag trend and the alerts).",
			Queries: []query{{Expr: catchUp(byTopic), Legend: legendTopic}}},
	}},
	{Title: "Latency", Panels: []panel{
		{Title: "Replication latency", Unit: "s", Description: "Read from the source to acknowledged by the target: the mirror's own latency.",
			Queries: percentiles("kafka_mirror_replication_latency_seconds")},
		{Title: "Record age at the target", Unit: "s", Description: "Source record timestamp to acknowledged by the target: end-to-end delay, backlog included.",
			Queries: percentiles("kafka_mirror_record_age_seconds")},
	}},
	{Title: "In flight and commits", Panels: []panel{
		{Title: "In-flight records", Unit: "short", Description: "Records read and not yet acknowledged by the target, by topic.",
			Queries: []query{{Expr: `sum by (` + byTopic + `) (kafka_mirror_inflight_records{` + selPartition + `})`, Legend: legendTopic}}},
		{Title: "In-flight bytes", Unit: "bytes", Description: "Bytes handed to the producer and not yet acknowledged, per pod: the part of maxInFlightBytes in use.",
			Queries: []query{{Expr: `sum by (` + byMirror + `, pod) (kafka_mirror_inflight_bytes{` + selMirror + `})`, Legend: "{{pod}}"}}},
		{Title: "Commit point advance", Unit: "rps", Description: "How fast the committed source offset moves, by topic: records per second that are mirrored for good (a restart would not read them again).",
			Queries: []query{{Expr: `sum by (` + byTopic + `) (deriv(kafka_mirror_committed_offset{` + selPartition + `}[$__rate_interval]))`, Legend: legendTopic}}},
		{Title: "Commits and stalled commits", Unit: "short", Description: "Offset commits confirmed by the source group coordinator per second; 'stalled' is 1 while records are in flight and nothing was committed for 10 minutes (the KafkaMirrorNotCommitting alert).",
			Queries: []query{
				{Expr: `sum by (` + byMirror + `) (rate(kafka_mirror_commits_total{` + selMirror + `}[$__rate_interval]))`, Legend: "commits/s, " + legendMirror},
				{Expr: `(sum by (` + byMirror + `) (kafka_mirror_inflight_records{` + selMirror + `}) > bool 0) * (sum by (` + byMirror + `) (increase(kafka_mirror_commits_total{` + selMirror + `}[10m])) == bool 0)`, Legend: "stalled, " + legendMirror},
			}},
	}},
	{Title: "Errors and rebalances", Panels: []panel{
		{Title: "Send errors", Unit: "short", Description: "Records whose send to the target finally failed, per 5 minutes; the engine stops and restarts from its last commit.",
			Queries: []query{{Expr: `sum by (` + byMirror + `) (increase(kafka_mirror_send_errors_total{` + selMirror + `}[5m]))`, Legend: legendMirror}}},
		{Title: "Rebalances", Unit: "short", Description: "Consumer-group sessions started, per 15 minutes, and rebalance listener failures.",
			Queries: []query{
				{Expr: `sum by (` + byMirror + `) (increase(kafka_mirror_rebalances_total{` + selMirror + `}[15m]))`, Legend: "sessions, " + legendMirror},
				{Expr: `sum by (` + byMirror + `) (increase(kafka_mirror_listener_errors_total{` + selMirror + `}[15m]))`, Legend: "listener errors, " + legendMirror},
			}},
		{Title: "Resumed from target progress", Unit: "short", Description: "Assignments that resumed from the target-side progress because the source group had no offset (expired or deleted), per hour.",
			Queries: []query{{Expr: `sum by (` + byTopic + `) (increase(kafka_mirror_resumed_from_target_total{` + selPartition + `}[1h]))`, Legend: legendTopic}}},
		{Title: "Pod restarts", Unit: "short", Description: "Container restarts of the mirror pods per hour, from kube-state-metrics (kube_pod_container_status_restarts_total); empty without kube-state-metrics.",
			Queries: []query{{Expr: `sum by (namespace, pod) (increase(kube_pod_container_status_restarts_total{namespace=~"$namespace", pod=~"($mirror)-mirror-.*"}[1h]))`, Legend: "{{pod}}"}}},
	}},
	{Title: "Target topics", Panels: []panel{
		{Title: "Partitions waiting for the target", Unit: "short", Description: "Source partitions whose target topic is missing or has too few partitions (partition drift the engine cannot write past), by topic.",
			Queries: []query{{Expr: `sum by (` + byTopic + `) (kafka_mirror_waiting_for_target{` + selPartition + `})`, Legend: legendTopic}}},
		{Title: "Operator reconciles", Unit: "short", Description: "KafkaMirror reconciles per second by result (the topic sync runs in every reconcile; an error is a failed step) and the work queue depth.",
			Queries: []query{
				{Expr: `sum by (result) (rate(controller_runtime_reconcile_total{controller="kafkamirror"}[$__rate_interval]))`, Legend: "{{result}}"},
				{Expr: `sum(workqueue_depth{name="kafkamirror"})`, Legend: "queue depth"},
			}},
	}},
}
