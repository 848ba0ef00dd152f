package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

const repoRoot = "../.."

// TestGeneratedFilesUpToDate fails when panels.go or rules.go changed without `make manifests`.
func TestGeneratedFilesUpToDate(t *testing.T) {
	if err := generate(repoRoot, true); err != nil {
		t.Fatal(err)
	}
}

// TestExpressionsParse parses every shipped PromQL expression with the Prometheus parser.
func TestExpressionsParse(t *testing.T) {
	exprs, err := shippedExpressions(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	// Every panel query, every variable and every alert: a count that drops means a file
	// lost expressions.
	want := 0
	for _, r := range dashboardRows {
		for _, p := range r.Panels {
			want += len(p.Queries)
		}
	}
	want += len(variables) + len(alerts)
	if len(exprs) != want {
		t.Errorf("found %d expressions in the shipped files, want %d", len(exprs), want)
	}
	for _, e := range exprs {
		q, _ := toPromQL(e.Expr)
		if _, err := inspect(q); err != nil {
			t.Errorf("%s: %v\n%s", e.Where, err, e.Expr)
		}
	}
}

// TestExpressionsNameLiveMetrics checks every metric and label the dashboard and the
// alerts name against what a real engine mirroring records between two Kafka clusters
// and a real operator serve on /metrics. Labels that Prometheus adds when it scrapes
// (namespace, pod, the mirror's name) and kube-state-metrics' metrics are the only
// names allowed that the scrape cannot show.
func TestExpressionsNameLiveMetrics(t *testing.T) {
	live := engineScrape(t)
	var engine []string // the engine's own names, before the operator's join them
	for name := range live {
		engine = append(engine, name)
	}
	live.merge(operatorScrape(t))

	exprs, err := shippedExpressions(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, e := range exprs {
		q, varLabel := toPromQL(e.Expr)
		u, err := inspect(q)
		if err != nil {
			t.Errorf("%s: %v", e.Where, err)
			continue
		}
		for _, s := range u.Selectors {
			used[s.Metric] = true
			if kubeStateMetrics[s.Metric] {
				continue
			}
			have, ok := live[s.Metric]
			if !ok {
				t.Errorf("%s: metric %s is not in the live scrape", e.Where, s.Metric)
				continue
			}
			for _, l := range append(s.Labels, varLabel) {
				if l != "" && !have[l] && !scrapeTargetLabels[l] {
					t.Errorf("%s: metric %s has no label %q in the live scrape (it has %v)", e.Where, s.Metric, l, keys(have))
				}
			}
		}
		for _, g := range u.Groupings {
			for _, l := range g.Labels {
				if scrapeTargetLabels[l] || slices.ContainsFunc(g.Metrics, func(m string) bool { return kubeStateMetrics[m] || live[m][l] }) {
					continue
				}
				t.Errorf("%s: groups by %q, which none of %v carries in the live scrape", e.Where, l, g.Metrics)
			}
		}
	}
	// The dashboard covers every kafka_mirror_* metric the engine exports: a new metric
	// gets a panel (or this list a reason). The operator's kafka_mirror_operator_* are
	// for alerts and kubectl (status.topics, status.groups) and are not all panels.
	for _, name := range engine {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
		if strings.HasPrefix(name, "kafka_mirror_") && !used[name] && !used[base+"_bucket"] {
			t.Errorf("metric %s is exported but neither a panel nor an alert uses it", name)
		}
	}
}

func keys(m map[string]bool) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// liveRecords is how many records the live run mirrors before the scrape: enough that
// every partition has acked records and the histograms have samples.
const liveRecords = 300

// engineScrape runs a real engine, mirrors liveRecords records (every tenth filtered
// out) and returns its /metrics once every kept record is counted.
func engineScrape(t *testing.T) exposition {
	t.Helper()
	r, err := startLiveRun(logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.close(); err != nil {
			t.Errorf("engine: %v", err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.produce(ctx, liveRecords, 100, 10); err != nil {
		t.Fatal(err)
	}
	var text string
	deadline := time.Now().Add(engineStartTimeout)
	for {
		if text, err = r.scrape(); err != nil {
			t.Fatal(err)
		}
		// Done when every kept record is acked, every filtered one counted, and every
		// partition reports its lag, down to 0 once the commit covers everything.
		mirrored, filtered := sumSamples(t, text, "kafka_mirror_records_total"), sumSamples(t, text, "kafka_mirror_filtered_records_total")
		lagSeries, lag := countSamples(t, text, "kafka_mirror_lag_records"), sumSamples(t, text, "kafka_mirror_lag_records")
		if mirrored == liveRecords*9/10 && filtered == liveRecords/10 && lagSeries == livePartitions && lag == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v the engine reports %v records mirrored, %v filtered, lag %v on %d partitions; want %d, %d, 0 on %d",
				engineStartTimeout, mirrored, filtered, lag, lagSeries, liveRecords*9/10, liveRecords/10, livePartitions)
		}
		time.Sleep(200 * time.Millisecond)
	}
	exp, err := parseExposition(text)
	if err != nil {
		t.Fatal(err)
	}
	return exp
}

// sumSamples adds up the values of every sample of metric in a text exposition.
func sumSamples(t *testing.T, text, metric string) float64 {
	t.Helper()
	samples, err := parseSamples(text)
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, s := range samples {
		if s.Name == metric {
			sum += s.Value
		}
	}
	return sum
}

// countSamples counts the series of metric in a text exposition.
func countSamples(t *testing.T, text, metric string) int {
	t.Helper()
	samples, err := parseSamples(text)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, s := range samples {
		if s.Name == metric {
			n++
		}
	}
	return n
}
