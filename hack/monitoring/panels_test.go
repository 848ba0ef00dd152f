package main

import (
	"context"
	"math"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
)

// allSelected fills the dashboard variables as "All" does, keeping the windows.
func allSelected(expr string) string {
	return strings.NewReplacer(`"$namespace"`, `".*"`, `"$mirror"`, `".*"`, `"$topic"`, `".*"`).Replace(expr)
}

// TestCatchUpNeedsRealProgress evaluates both catch-up panels over 30 minutes of
// samples every 15 s (issue 30 item 11: the preview showed 225,000 s when the lag
// shrank by a hair). A lag that does not shrink, and one that shrinks by a hundredth of
// a record per second while the commit point advances by 100/s, give no value; a lag
// that shrinks by 50/s gives lag / 50.
func TestCatchUpNeedsRealProgress(t *testing.T) {
	const series = `{namespace="demo", app_kubernetes_io_instance="orders", topic="%s", partition="0"}`
	at := func(topic string) string { return strings.ReplaceAll(series, "%s", topic) }
	// 124 steps of 15 s: 31 minutes, evaluated at 30 minutes (step 120).
	load := func(lines ...string) string { return "load 15s\n  " + strings.Join(lines, "\n  ") + "\n" }
	stalled := load(
		"kafka_mirror_lag_records"+at("stalled")+" 1000x124",
		"kafka_mirror_committed_offset"+at("stalled")+" 5000x124")
	hair := load( // shrinks by 0.01/s (0.15 a scrape) while 100/s are committed
		"kafka_mirror_lag_records"+at("hair")+" 10000-0.15x124",
		"kafka_mirror_committed_offset"+at("hair")+" 0+1500x124")
	catching := load( // shrinks by 50/s while 100/s are committed: 10000 left at 30 min
		"kafka_mirror_lag_records"+at("catching")+" 100000-750x124",
		"kafka_mirror_committed_offset"+at("catching")+" 0+1500x124")
	both := load(
		"kafka_mirror_lag_records"+at("hair")+" 10000-0.15x124",
		"kafka_mirror_committed_offset"+at("hair")+" 0+1500x124",
		"kafka_mirror_lag_records"+at("catching")+" 100000-750x124",
		"kafka_mirror_committed_offset"+at("catching")+" 0+1500x124")

	total, byTopic := allSelected(catchUp("")), allSelected(catchUp(byTopic))
	for _, tc := range []struct {
		name, input, expr string
		want              map[string]float64 // by topic ("" for the total); empty: no value
	}{
		{"total, lag not shrinking", stalled, total, nil},
		{"total, lag shrinking by a hair", hair, total, nil},
		{"total, lag shrinking", catching, total, map[string]float64{"": 200}},
		{"by topic, lag not shrinking", stalled, byTopic, nil},
		{"by topic, one by a hair, one shrinking", both, byTopic, map[string]float64{"catching": 200}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			storage := promqltest.LoadedStorage(t, tc.input)
			engine := promqltest.NewTestEngine(t, false, 5*time.Minute, promqltest.DefaultMaxSamplesPerQuery)
			q, err := engine.NewInstantQuery(context.Background(), storage, nil, tc.expr, time.Unix(0, 0).Add(30*time.Minute))
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			res := q.Exec(context.Background())
			if res.Err != nil {
				t.Fatal(res.Err)
			}
			vec, err := res.Vector()
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]float64{}
			for _, s := range vec {
				got[s.Metric.Get("topic")] = s.F
			}
			if len(got) != len(tc.want) {
				t.Fatalf("%v, want %v\n%s", got, tc.want, tc.expr)
			}
			for topic, want := range tc.want {
				if g, ok := got[topic]; !ok || math.Abs(g-want) > want/100 {
					t.Fatalf("%v, want %v\n%s", got, tc.want, tc.expr)
				}
			}
		})
	}
}

var legendLabel = regexp.MustCompile(`\{\{\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\}\}`)

// seriesLabels returns the labels of the series expr returns: the grouping of its
// outermost aggregation (histogram_quantile drops le; a binary operation keeps its
// left-hand side's).
func seriesLabels(t *testing.T, expr string) []string {
	t.Helper()
	q, _ := toPromQL(allSelected(expr))
	e, err := parser.NewParser(parser.Options{}).ParseExpr(q)
	if err != nil {
		t.Fatal(err)
	}
	var walk func(parser.Expr) []string
	walk = func(e parser.Expr) []string {
		switch n := e.(type) {
		case *parser.AggregateExpr:
			return n.Grouping
		case *parser.ParenExpr:
			return walk(n.Expr)
		case *parser.BinaryExpr:
			if l := walk(n.LHS); l != nil {
				return l
			}
			return walk(n.RHS)
		case *parser.Call:
			if n.Func.Name == "histogram_quantile" {
				return slices.DeleteFunc(slices.Clone(walk(n.Args[1])), func(l string) bool { return l == "le" })
			}
		}
		return nil
	}
	return walk(e)
}

// TestLegendsNameEachSeriesOnce checks every legend of the dashboard (issue 30 item 11:
// "orders orders"): it names a label at most once, only labels its series carry, every
// label that tells its series apart (the namespace aside; a pod's name starts with its
// mirror's), and, for a mirror named after its topic, it never shows one name twice in
// a row; the series of one panel's queries read differently.
func TestLegendsNameEachSeriesOnce(t *testing.T) {
	values := map[string]string{
		"namespace": "orders", "app_kubernetes_io_instance": "orders", "topic": "orders",
		"partition": "0", "pod": "orders-mirror-0", "result": "success",
	}
	word := regexp.MustCompile(`[A-Za-z0-9_.-]+`)
	for _, r := range dashboardRows {
		for _, p := range r.Panels {
			rendered := map[string]bool{}
			for _, q := range p.Queries {
				if p.Kind == kindStat {
					continue
				}
				have := seriesLabels(t, q.Expr)
				named := map[string]int{}
				for _, m := range legendLabel.FindAllStringSubmatch(q.Legend, -1) {
					named[m[1]]++
				}
				for l, n := range named {
					if n > 1 {
						t.Errorf("%s: legend %q names %s %d times", p.Title, q.Legend, l, n)
					}
					if !slices.Contains(have, l) {
						t.Errorf("%s: legend %q names %s, which its series (by %v) do not carry", p.Title, q.Legend, l, have)
					}
				}
				for _, l := range have {
					if named[l] == 0 && l != "namespace" && (l != "app_kubernetes_io_instance" || named["pod"] == 0) {
						t.Errorf("%s: legend %q leaves out %s, which tells its series apart", p.Title, q.Legend, l)
					}
				}
				text := legendLabel.ReplaceAllStringFunc(q.Legend, func(m string) string {
					return values[legendLabel.FindStringSubmatch(m)[1]]
				})
				words := word.FindAllString(text, -1)
				for i := 1; i < len(words); i++ {
					if words[i] == words[i-1] {
						t.Errorf("%s: legend %q reads %q for a mirror named after its topic", p.Title, q.Legend, text)
					}
				}
				if rendered[text] {
					t.Errorf("%s: two queries' series both read %q", p.Title, text)
				}
				rendered[text] = true
			}
		}
	}
}
