package main

import (
	"context"
	"fmt"
	"image/color"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/tsdb"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// The preview run: a mirror of one topic whose producers write a steady trickle and two
// bursts, scraped every previewScrape like Prometheus would, then the dashboard's own
// panel queries evaluated over the stored samples and plotted.
const (
	previewDuration   = 100 * time.Second
	previewScrape     = time.Second
	previewTrickle    = 200 // records per second between the bursts
	previewBurst      = 60000
	previewValueBytes = 512
	// previewRange replaces Grafana's $__rate_interval, and previewTrend the 15-minute
	// windows of the trend panels: the run lasts minutes, not hours.
	previewRange = "10s"
	previewTrend = "30s"
)

// previewPanels are the dashboard panels the picture shows, by title.
var previewPanels = []string{
	"Records/s by topic", "Lag per partition", "Time to catch up by topic",
	"Replication latency", "Record age at the target", "In-flight records",
}

// scrape target labels the preview adds to every sample, as the ServiceMonitor would.
var previewTarget = map[string]string{"namespace": "demo", "app_kubernetes_io_instance": "orders", "pod": "orders-mirror-0"}

// renderPreview runs the mirror, stores its scrapes in a Prometheus TSDB and writes the
// panel plots to path.
func renderPreview(path string) error {
	dir, err := os.MkdirTemp("", "kafka-mirror-preview")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, err := tsdb.Open(dir, slog.New(slog.DiscardHandler), nil, tsdb.DefaultOptions(), nil)
	if err != nil {
		return fmt.Errorf("while opening the preview TSDB: %w", err)
	}
	defer db.Close()

	start, end, err := recordRun(db)
	if err != nil {
		return err
	}
	engine := promql.NewEngine(promql.EngineOpts{MaxSamples: 10_000_000, Timeout: time.Minute, LookbackDelta: 5 * previewScrape})
	var plots []*plot.Plot
	for _, title := range previewPanels {
		pn, ok := panelByTitle(title)
		if !ok {
			return fmt.Errorf("no dashboard panel is titled %q", title)
		}
		p, err := plotPanel(engine, db, pn, start, end)
		if err != nil {
			return err
		}
		plots = append(plots, p)
	}
	return savePlots(plots, path)
}

// recordRun runs the mirror and the workload for previewDuration, appending every scrape
// to db, and returns the time range it covered.
func recordRun(db *tsdb.DB) (start, end time.Time, err error) {
	run, err := startLiveRun(logr.Discard())
	if err != nil {
		return start, end, err
	}
	defer func() {
		if cerr := run.close(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), previewDuration)
	defer cancel()
	go workload(ctx, run)

	start = time.Now()
	tick := time.NewTicker(previewScrape)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return start, time.Now(), nil
		case now := <-tick.C:
			text, err := run.scrape()
			if err != nil {
				return start, end, err
			}
			if err := store(db, text, now); err != nil {
				return start, end, err
			}
		}
	}
}

// workload writes a trickle of previewTrickle records/s, with bursts of previewBurst
// records after 20% and 55% of the run; every 20th record is filtered out by the handler.
func workload(ctx context.Context, run *liveRun) {
	bursts := []time.Duration{previewDuration / 5, previewDuration * 55 / 100}
	begin := time.Now()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			n := previewTrickle / 10
			if len(bursts) > 0 && time.Since(begin) >= bursts[0] {
				n, bursts = previewBurst, bursts[1:]
			}
			if err := run.produce(ctx, n, previewValueBytes, 20); err != nil && ctx.Err() == nil {
				fmt.Fprintln(os.Stderr, "monitoring: preview producer:", err)
			}
		}
	}
}

// store appends one scrape to db with the target labels Prometheus would add.
func store(db *tsdb.DB, text string, at time.Time) error {
	samples, err := parseSamples(text)
	if err != nil {
		return err
	}
	app := db.Appender(context.Background())
	for _, s := range samples {
		b := labels.NewBuilder(labels.EmptyLabels())
		b.Set(labels.MetricName, s.Name)
		for k, v := range s.Labels {
			b.Set(k, v)
		}
		for k, v := range previewTarget {
			b.Set(k, v)
		}
		if _, err := app.Append(0, b.Labels(), at.UnixMilli(), s.Value); err != nil {
			_ = app.Rollback()
			return fmt.Errorf("while storing %s: %w", s.Name, err)
		}
	}
	return app.Commit()
}

func panelByTitle(title string) (panel, bool) {
	for _, r := range dashboardRows {
		for _, p := range r.Panels {
			if p.Title == title {
				return p, true
			}
		}
	}
	return panel{}, false
}

// previewQuery turns a panel query into one for the short run: every variable selects
// all, and the windows shrink to the run's scale.
func previewQuery(expr string) string {
	return strings.NewReplacer(
		`"$namespace"`, `".*"`, `"$mirror"`, `".*"`, `"$topic"`, `".*"`,
		"$__rate_interval", previewRange, "[15m]", "["+previewTrend+"]",
	).Replace(expr)
}

// plotPanel evaluates the panel's queries over [start, end] and draws one line per series.
func plotPanel(engine *promql.Engine, db *tsdb.DB, p panel, start, end time.Time) (*plot.Plot, error) {
	pl := plot.New()
	pl.Title.Text = p.Title
	pl.X.Label.Text = "seconds"
	pl.Y.Label.Text = p.Unit
	pl.Legend.Top = true
	line := 0
	for _, q := range p.Queries {
		query, err := engine.NewRangeQuery(context.Background(), db, nil, previewQuery(q.Expr), start, end, previewScrape)
		if err != nil {
			return nil, fmt.Errorf("while querying %q for %s: %w", q.Expr, p.Title, err)
		}
		res := query.Exec(context.Background())
		if res.Err != nil {
			return nil, fmt.Errorf("while querying %q for %s: %w", q.Expr, p.Title, res.Err)
		}
		matrix, err := res.Matrix()
		if err != nil {
			return nil, err
		}
		for _, series := range matrix {
			// A step with no value (the catch-up time while the lag does not shrink) is a
			// gap, as Grafana draws it: one line per run of consecutive steps.
			var first *plotter.Line
			for _, run := range runs(series.Floats, previewScrape) {
				pts := make(plotter.XYs, 0, len(run))
				for _, f := range run {
					pts = append(pts, plotter.XY{X: float64(f.T-start.UnixMilli()) / 1000, Y: f.F})
				}
				l, err := plotter.NewLine(pts)
				if err != nil {
					return nil, err
				}
				l.Color = plotutil.Color(line)
				l.Width = vg.Points(1.5)
				pl.Add(l)
				if first == nil {
					first = l
				}
			}
			if first != nil {
				pl.Legend.Add(legend(q.Legend, series.Metric), first)
			}
			line++
		}
		query.Close()
	}
	pl.Add(plotter.NewGrid())
	return pl, nil
}

// runs splits a series' points where a step has no value.
func runs(fs []promql.FPoint, step time.Duration) [][]promql.FPoint {
	var out [][]promql.FPoint
	begin := 0
	for i := 1; i <= len(fs); i++ {
		if i == len(fs) || fs[i].T-fs[i-1].T > step.Milliseconds() {
			out = append(out, fs[begin:i])
			begin = i
		}
	}
	return out
}

// legend fills a Grafana legend template ({{label}}) from the series' labels.
func legend(format string, ls labels.Labels) string {
	out := format
	ls.Range(func(l labels.Label) {
		out = strings.ReplaceAll(out, "{{"+l.Name+"}}", l.Value)
	})
	return out
}

// Size of the preview picture: three panels a row, like a dashboard on a wide screen.
const (
	previewColumns = 3
	previewWidth   = 15 * vg.Inch
	previewHeight  = 8 * vg.Inch
)

func savePlots(plots []*plot.Plot, path string) error {
	rows := (len(plots) + previewColumns - 1) / previewColumns
	img := vgimg.NewWith(vgimg.UseWH(previewWidth, previewHeight), vgimg.UseBackgroundColor(color.White))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: rows, Cols: previewColumns, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	grid := make([][]*plot.Plot, rows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, previewColumns)
	}
	for i, p := range plots {
		grid[i/previewColumns][i%previewColumns] = p
	}
	canvases := plot.Align(grid, tiles, dc)
	for i, p := range plots {
		p.Draw(canvases[i/previewColumns][i%previewColumns])
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return fmt.Errorf("while writing %s: %w", path, err)
	}
	return f.Close()
}
