package mirror

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/internal/testutil"
)

func TestInFlightBytesFor(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := map[string]struct {
		configured int64
		file       string
		want       int64
	}{
		"configured wins":               {configured: 1 << 20, file: write("limit", "1073741824\n"), want: 1 << 20},
		"a quarter of the memory limit": {file: write("limit2", "1073741824\n"), want: 256 << 20},
		"no memory limit":               {file: write("max", "max\n"), want: defaultInFlightBytes},
		"no cgroup file":                {file: filepath.Join(dir, "missing"), want: defaultInFlightBytes},
		"unreadable limit":              {file: write("junk", "lots\n"), want: defaultInFlightBytes},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := inFlightBytesFor(tc.configured, tc.file); got != tc.want {
				t.Fatalf("inFlightBytesFor = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestByteBudget(t *testing.T) {
	ctx := context.Background()
	never := make(chan struct{})
	b := newInFlightBudget(100)
	if err := b.acquire(ctx, never, 60); err != nil {
		t.Fatal(err)
	}
	// 60 + 50 > 100: waits until bytes are given back.
	got := make(chan error, 1)
	go func() { got <- b.acquire(ctx, never, 50) }()
	select {
	case err := <-got:
		t.Fatalf("acquire over the budget returned %v without waiting", err)
	case <-time.After(50 * time.Millisecond):
	}
	b.release(60)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if used, peak := b.usage(); used != 50 || peak != 60 {
		t.Fatalf("used %d, peak %d; want 50, 60", used, peak)
	}

	// A waiter gives up when ctx ends or the engine stops, and takes nothing.
	cctx, cancel := context.WithCancel(ctx)
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	if err := b.acquire(cctx, never, 80); !errors.Is(err, context.Canceled) {
		t.Fatalf("acquire after cancel = %v, want context.Canceled", err)
	}
	stop := make(chan struct{})
	close(stop)
	if err := b.acquire(ctx, stop, 80); !errors.Is(err, errStopped) {
		t.Fatalf("acquire after stop = %v, want errStopped", err)
	}
	if used, _ := b.usage(); used != 50 {
		t.Fatalf("used %d after the abandoned waits, want 50", used)
	}

	// A record larger than the whole budget passes alone, once nothing is in flight.
	go func() { got <- b.acquire(ctx, never, 500) }()
	select {
	case err := <-got:
		t.Fatalf("an oversized record passed with %v while 50 bytes were in flight", err)
	case <-time.After(50 * time.Millisecond):
	}
	b.release(50)
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if used, peak := b.usage(); used != 500 || peak != 500 {
		t.Fatalf("used %d, peak %d; want 500, 500", used, peak)
	}
	b.release(500)
}

// TestBudgetWakesWaitersBelowResume checks the hysteresis: a release that leaves the
// budget above its resume level wakes nobody; the one that reaches it wakes the waiter,
// which then takes what fits.
func TestBudgetWakesWaitersBelowResume(t *testing.T) {
	ctx := context.Background()
	never := make(chan struct{})
	b := newInFlightBudget(800) // resume 700
	if err := b.acquire(ctx, never, 800); err != nil {
		t.Fatal(err)
	}
	got := make(chan error, 1)
	go func() { got <- b.acquire(ctx, never, 10) }()
	testutil.WaitFor(t, 10*time.Second, "the acquire to wait", func() bool { return b.waiters.Load() == 1 })
	b.release(50) // 750 in use: room for 10, but above resume
	select {
	case err := <-got:
		t.Fatalf("a release to 750 (resume 700) woke the waiter: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	b.release(50) // 700: at resume
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if used, peak := b.usage(); used != 710 || peak != 800 {
		t.Fatalf("used %d, peak %d; want 710, 800", used, peak)
	}
}

// TestBudgetUnderConcurrentUse takes and gives back from many goroutines at once (run
// with -race): use never passes the limit, and everything given back leaves it at 0.
func TestBudgetUnderConcurrentUse(t *testing.T) {
	ctx := context.Background()
	never := make(chan struct{})
	const limit = 1000
	b := newInFlightBudget(limit)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 2000; i++ {
				n := int64(1 + (g*7+i)%100)
				if err := b.acquire(ctx, never, n); err != nil {
					t.Error(err)
					return
				}
				if used, _ := b.usage(); used > limit {
					t.Errorf("%d in use, limit %d", used, limit)
				}
				b.release(n)
			}
		}(g)
	}
	wg.Wait()
	if used, peak := b.usage(); used != 0 || peak > limit {
		t.Fatalf("used %d, peak %d after all releases; want 0, <= %d", used, peak, limit)
	}
}

func TestInFlightRecordsFor(t *testing.T) {
	for _, tc := range []struct{ perPartition, want int }{
		{10000, inFlightRecordsPerProcess},
		{1, inFlightRecordsPerProcess},
		{100000, 100000},
	} {
		if got := inFlightRecordsFor(tc.perPartition); got != int64(tc.want) {
			t.Errorf("inFlightRecordsFor(%d) = %d, want %d", tc.perPartition, got, tc.want)
		}
	}
}

func TestInFlightRecordsBound(t *testing.T) {
	for _, tc := range []struct {
		perPartition, partitions int
		want                     int64
	}{
		{10000, 8, inFlightRecordsPerProcess}, // the process-wide bound is lower
		{1000, 8, 8000},                       // the per-partition bound is lower
		{100000, 1, 100000},                   // one partition may use its own bound whole
		{40000, 2, 40000},
	} {
		if got := InFlightRecordsBound(tc.perPartition, tc.partitions); got != tc.want {
			t.Errorf("InFlightRecordsBound(%d, %d) = %d, want %d", tc.perPartition, tc.partitions, got, tc.want)
		}
	}
}
