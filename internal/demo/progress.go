package demo

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
)

// progress is one frame of the live view.
type progress struct {
	Elapsed       time.Duration
	Produced      int64
	ToProduce     int64
	Engine        string // running, starting, killed, stopped
	PID           int    // the engine process, 0 when none runs
	RecordsPerSec float64
	BytesPerSec   float64
	InFlight      float64
	Commits       float64
	Filtered      float64
	Topics        []topicState
}

// view prints the demo's story (events) and its live progress. On a terminal the
// progress block is redrawn in place under the events; otherwise (a pipe, a CI log) every
// frame is one plain line, so the output reads well in a file.
type view struct {
	mu    sync.Mutex
	w     io.Writer
	tty   bool
	width int // terminal columns; block lines are cut to fit so that none wraps
	start time.Time
	block []string // the progress block last drawn on the terminal
	drawn int      // lines of it currently on screen
}

func newView(w io.Writer, tty bool, width int, start time.Time) *view {
	return &view{w: w, tty: tty, width: width, start: start}
}

// event prints one line of the story, stamped with the time since the demo started.
func (v *view) event(format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.erase()
	fmt.Fprintf(v.w, "[%5.1fs] %s\n", time.Since(v.start).Seconds(), fmt.Sprintf(format, args...))
	v.redraw()
}

// text prints lines as they are (a table, the report), above the progress block.
func (v *view) text(s string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.erase()
	fmt.Fprint(v.w, s)
	v.redraw()
}

// show draws a progress frame.
func (v *view) show(p progress) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.tty {
		fmt.Fprintln(v.w, plainLine(p))
		return
	}
	v.erase()
	v.block = progressBlock(p)
	v.redraw()
}

// done leaves the last progress block on screen as ordinary output, so what follows
// is printed below it.
func (v *view) done() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.block, v.drawn = nil, 0
}

func (v *view) erase() {
	if v.drawn > 0 {
		// Up to the block's first line, then clear to the end of the screen.
		fmt.Fprintf(v.w, "\x1b[%dA\r\x1b[J", v.drawn)
		v.drawn = 0
	}
}

func (v *view) redraw() {
	if !v.tty || len(v.block) == 0 {
		return
	}
	for _, l := range v.block {
		// A wrapped line would take two rows and the next erase would miss one.
		if r := []rune(l); v.width > 0 && len(r) >= v.width {
			l = string(r[:v.width-1])
		}
		fmt.Fprintln(v.w, l)
	}
	v.drawn = len(v.block)
}

func progressBlock(p progress) []string {
	lines := []string{
		fmt.Sprintf("── %5.1fs ── engine %s ──", p.Elapsed.Seconds(), engineLabel(p)),
		fmt.Sprintf("   produced %s/%s · mirroring %s rec/s, %s/s",
			count(p.Produced), count(p.ToProduce), count(int64(p.RecordsPerSec)), byteSize(p.BytesPerSec)),
		fmt.Sprintf("   in flight %s · commits %s · filtered %s",
			count(int64(p.InFlight)), count(int64(p.Commits)), count(int64(p.Filtered))),
		fmt.Sprintf("   %-12s %-11s %10s %10s %10s %8s", "TOPIC", "PARTITIONS", "SOURCE", "TARGET", "COMMITTED", "LAG"),
	}
	for _, t := range p.Topics {
		lines = append(lines, fmt.Sprintf("   %-12s %-11s %10s %10s %10s %8s", t.Source,
			fmt.Sprintf("%d -> %d", t.SourcePartitions, t.TargetPartitions),
			count(t.SourceEnd), count(t.TargetEnd), count(t.Committed), count(t.Lag)))
	}
	return lines
}

func plainLine(p progress) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%5.1fs] progress: engine=%s produced=%d/%d rec/s=%.0f bytes/s=%.0f inflight=%.0f commits=%.0f filtered=%.0f lag:",
		p.Elapsed.Seconds(), p.Engine, p.Produced, p.ToProduce, p.RecordsPerSec, p.BytesPerSec,
		p.InFlight, p.Commits, p.Filtered)
	for _, t := range p.Topics {
		fmt.Fprintf(&b, " %s=%d", t.Source, t.Lag)
	}
	return b.String()
}

func engineLabel(p progress) string {
	if p.PID == 0 {
		return p.Engine
	}
	return fmt.Sprintf("%s (pid %d)", p.Engine, p.PID)
}

// count formats n with thousands separators: 1234567 -> 1,234,567.
func count(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// byteSize formats a byte rate in decimal units.
func byteSize(b float64) string {
	switch {
	case b >= 1e9:
		return fmt.Sprintf("%.1f GB", b/1e9)
	case b >= 1e6:
		return fmt.Sprintf("%.1f MB", b/1e6)
	case b >= 1e3:
		return fmt.Sprintf("%.1f kB", b/1e3)
	default:
		return fmt.Sprintf("%.0f B", b)
	}
}
