package mirror

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
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
	b := newByteBudget(100)
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
