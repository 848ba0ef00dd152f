package offsets

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// model is the obvious, slow definition of the commit point the tracker must match.
type model struct {
	pending  map[int64]int // offset -> un-acked outputs
	lastSeen int64
}

func (m *model) commitPoint() int64 {
	lowest := int64(-1)
	for off, n := range m.pending {
		if n > 0 && (lowest < 0 || off < lowest) {
			lowest = off
		}
	}
	if lowest >= 0 {
		return lowest
	}
	return m.lastSeen + 1
}

type sent struct {
	offset int64
	ticket Ticket
}

func TestCommitPointMatchesModel(t *testing.T) {
	tests := map[string]struct {
		records  int
		gapEvery int // every gapEvery-th offset is skipped (0: no gaps)
		fanOut   func(r *rand.Rand) int
		order    func(r *rand.Rand, acks []sent)
	}{
		"in order": {
			records: 1500, fanOut: one, order: func(*rand.Rand, []sent) {},
		},
		"fully reversed": {
			records: 2000, fanOut: one, order: reverse,
		},
		"random order": {
			records: 5000, fanOut: one, order: shuffle,
		},
		"random order with gaps": {
			records: 3000, gapEvery: 3, fanOut: one, order: shuffle,
		},
		"reversed with gaps and drops": {
			records: 2000, gapEvery: 7, fanOut: func(r *rand.Rand) int { return r.IntN(2) }, order: reverse,
		},
		"fan out 1 to N in random order": {
			records: 2000, fanOut: func(r *rand.Rand) int { return r.IntN(4) }, order: shuffle,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(1, uint64(len(name))))
			tr := New(16) // small on purpose: the ring must grow correctly
			m := &model{pending: map[int64]int{}, lastSeen: -1}
			var acks []sent
			off := int64(100)
			for i := 0; i < tc.records; i++ {
				if tc.gapEvery > 0 && i%tc.gapEvery == 0 {
					off += 2 // a transaction marker or a compacted record
				}
				n := tc.fanOut(r)
				tk := tr.Add(off, n)
				m.lastSeen = off
				if n > 0 {
					m.pending[off] = n
				}
				for j := 0; j < n; j++ {
					acks = append(acks, sent{off, tk})
				}
				off++
			}
			if got, want := mustPoint(t, tr), m.commitPoint(); got != want {
				t.Fatalf("before acks: commit point %d, want %d", got, want)
			}
			tc.order(r, acks)
			for i, a := range acks {
				tr.Ack(a.ticket)
				m.pending[a.offset]--
				if got, want := mustPoint(t, tr), m.commitPoint(); got != want {
					t.Fatalf("after ack %d (offset %d): commit point %d, want %d", i, a.offset, got, want)
				}
			}
			if got := tr.InFlight(); got != 0 {
				t.Fatalf("in flight after all acks = %d, want 0", got)
			}
			if got, want := mustPoint(t, tr), off; got != want {
				t.Fatalf("final commit point %d, want last seen + 1 = %d", got, want)
			}
		})
	}
}

func TestInterleavedAddAndAck(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	tr := New(0)
	m := &model{pending: map[int64]int{}, lastSeen: -1}
	var open []sent
	for off := int64(0); off < 20000; off++ {
		n := r.IntN(3)
		tk := tr.Add(off, n)
		m.lastSeen = off
		if n > 0 {
			m.pending[off] = n
		}
		for j := 0; j < n; j++ {
			open = append(open, sent{off, tk})
		}
		// Ack a random number of random open outputs, keeping a window in flight.
		for k := r.IntN(4); k > 0 && len(open) > 0; k-- {
			i := r.IntN(len(open))
			a := open[i]
			open[i] = open[len(open)-1]
			open = open[:len(open)-1]
			tr.Ack(a.ticket)
			m.pending[a.offset]--
		}
		if got, want := mustPoint(t, tr), m.commitPoint(); got != want {
			t.Fatalf("offset %d: commit point %d, want %d", off, got, want)
		}
	}
}

func TestEdgeCases(t *testing.T) {
	tests := map[string]struct {
		run       func(tr *Tracker)
		wantPoint int64
		wantOK    bool
		wantLive  int
	}{
		"empty": {
			run: func(*Tracker) {}, wantOK: false,
		},
		"only dropped records": {
			run:       func(tr *Tracker) { tr.Add(5, 0); tr.Add(9, 0) },
			wantPoint: 10, wantOK: true,
		},
		"dropped after in flight waits for the older record": {
			run:       func(tr *Tracker) { tr.Add(5, 1); tr.Add(6, 0) },
			wantPoint: 5, wantOK: true, wantLive: 1,
		},
		"duplicate ack is ignored": {
			run: func(tr *Tracker) {
				a := tr.Add(1, 1)
				tr.Add(2, 1)
				tr.Ack(a)
				tr.Ack(a) // must not count as the ack of offset 2
			},
			wantPoint: 2, wantOK: true, wantLive: 1,
		},
		"unknown ticket is ignored": {
			run:       func(tr *Tracker) { tr.Add(1, 1); tr.Ack(Ticket(99)) },
			wantPoint: 1, wantOK: true, wantLive: 1,
		},
		"fan out needs every output": {
			run: func(tr *Tracker) {
				a := tr.Add(1, 3)
				tr.Ack(a)
				tr.Ack(a)
			},
			wantPoint: 1, wantOK: true, wantLive: 1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tr := New(1)
			tc.run(tr)
			p, ok := tr.CommitPoint()
			if ok != tc.wantOK || (ok && p != tc.wantPoint) {
				t.Fatalf("CommitPoint() = %d, %v, want %d, %v", p, ok, tc.wantPoint, tc.wantOK)
			}
			if got := tr.InFlight(); got != tc.wantLive {
				t.Fatalf("InFlight() = %d, want %d", got, tc.wantLive)
			}
		})
	}
}

// TestConcurrentAckAndWait runs the engine's pattern: one goroutine adds with
// backpressure, another acks, and the producer of acks is slower than the reader.
func TestConcurrentAckAndWait(t *testing.T) {
	const total, limit = 50000, 100
	tr := New(limit)
	tickets := make(chan Ticket, total)
	var wg sync.WaitGroup
	wg.Add(1)
	maxLive := 0
	go func() {
		defer wg.Done()
		for tk := range tickets {
			tr.Ack(tk)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for off := int64(0); off < total; off++ {
		if err := tr.WaitBelow(ctx, limit); err != nil {
			t.Fatalf("WaitBelow at offset %d: %v", off, err)
		}
		tickets <- tr.Add(off, 1)
		maxLive = max(maxLive, tr.InFlight())
	}
	close(tickets)
	if err := tr.WaitBelow(ctx, 1); err != nil {
		t.Fatalf("drain: %v", err)
	}
	wg.Wait()
	if maxLive > limit {
		t.Fatalf("in flight reached %d, limit %d", maxLive, limit)
	}
	if got := mustPoint(t, tr); got != total {
		t.Fatalf("commit point %d after draining, want %d", got, total)
	}
}

func TestWaitBelowHonoursContext(t *testing.T) {
	tr := New(1)
	tr.Add(1, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := tr.WaitBelow(ctx, 1); err != context.DeadlineExceeded {
		t.Fatalf("WaitBelow = %v, want deadline exceeded", err)
	}
}

func TestSteadyStateDoesNotAllocate(t *testing.T) {
	tr := New(1024)
	var window [512]Ticket
	off := int64(0)
	for i := range window {
		window[i] = tr.Add(off, 1)
		off++
	}
	i := 0
	allocs := testing.AllocsPerRun(10000, func() {
		tr.Ack(window[i])
		window[i] = tr.Add(off, 1)
		off++
		i = (i + 1) % len(window)
		tr.CommitPoint()
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per record, want 0", allocs)
	}
}

func mustPoint(t *testing.T, tr *Tracker) int64 {
	t.Helper()
	p, ok := tr.CommitPoint()
	if !ok {
		t.Fatal("CommitPoint: nothing seen")
	}
	return p
}

func one(*rand.Rand) int { return 1 }

func reverse(_ *rand.Rand, s []sent) {
	for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
		s[i], s[j] = s[j], s[i]
	}
}

func shuffle(r *rand.Rand, s []sent) {
	r.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
}

// TestAdvanceIdle checks that the commit point moves past offsets the consumer never
// delivers only while nothing is in flight and the commit point is still where the
// caller saw it.
func TestAdvanceIdle(t *testing.T) {
	tests := map[string]struct {
		setup    func(tr *Tracker)
		from, to int64
		moved    bool
		want     int64 // commit point afterwards; -1: none
	}{
		"idle at the marker": {
			setup: func(tr *Tracker) { tr.Ack(tr.Add(9, 1)) },
			from:  10, to: 11, moved: true, want: 11,
		},
		"before the first record, from the claim's start": {
			setup: func(*Tracker) {},
			from:  40, to: 42, moved: true, want: 42,
		},
		"a record in flight": {
			setup: func(tr *Tracker) { tr.Add(9, 1) },
			from:  9, to: 11, moved: false, want: 9,
		},
		"a record read since the caller looked": {
			setup: func(tr *Tracker) { tr.Ack(tr.Add(10, 1)) },
			from:  10, to: 12, moved: false, want: 11,
		},
		"filtered record, idle": {
			setup: func(tr *Tracker) { tr.Add(4, 0) },
			from:  5, to: 7, moved: true, want: 7,
		},
		"nothing to pass": {
			setup: func(tr *Tracker) { tr.Ack(tr.Add(9, 1)) },
			from:  10, to: 10, moved: false, want: 10,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tr := New(8)
			tc.setup(tr)
			if got := tr.AdvanceIdle(tc.from, tc.to); got != tc.moved {
				t.Fatalf("AdvanceIdle(%d, %d) = %v, want %v", tc.from, tc.to, got, tc.moved)
			}
			cp, ok := tr.CommitPoint()
			if !ok {
				cp = -1
			}
			if cp != tc.want {
				t.Fatalf("commit point %d (ok=%v), want %d", cp, ok, tc.want)
			}
			// The next record after an advance is at or above the new commit point.
			if tc.moved {
				tk := tr.Add(tc.to, 1)
				if cp, _ := tr.CommitPoint(); cp != tc.to {
					t.Fatalf("commit point %d with record %d in flight, want %d", cp, tc.to, tc.to)
				}
				tr.Ack(tk)
				if cp, _ := tr.CommitPoint(); cp != tc.to+1 {
					t.Fatalf("commit point %d after its ack, want %d", cp, tc.to+1)
				}
			}
		})
	}
}

// TestWaitForRoomHysteresis checks that a reader held at the limit is let go only once
// fewer than resume records are in flight, and passes at once below the limit.
func TestWaitForRoomHysteresis(t *testing.T) {
	const limit, resume = 8, 4
	tr := New(limit)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var tickets []Ticket
	for off := int64(0); off < limit; off++ {
		if err := tr.WaitForRoom(ctx, limit, resume); err != nil {
			t.Fatalf("WaitForRoom below the limit, at %d in flight: %v", off, err)
		}
		tickets = append(tickets, tr.Add(off, 1))
	}
	released := make(chan int, 1)
	go func() {
		if err := tr.WaitForRoom(ctx, limit, resume); err != nil {
			t.Errorf("WaitForRoom at the limit: %v", err)
		}
		released <- tr.InFlight()
	}()
	// Wait until the reader is blocked, so that the acks below cannot come first.
	for waiting := false; !waiting; {
		tr.mu.Lock()
		waiting = tr.waitBelow != 0
		tr.mu.Unlock()
		if ctx.Err() != nil {
			t.Fatal("the reader never blocked at the limit")
		}
		time.Sleep(time.Millisecond)
	}
	// Acks that leave limit-1 .. resume records in flight must not release the reader;
	// the one that leaves resume-1 must.
	for i, tk := range tickets[:limit-resume+1] {
		select {
		case n := <-released:
			t.Fatalf("released with %d in flight after %d acks, want fewer than %d", n, i, resume)
		case <-time.After(20 * time.Millisecond):
		}
		tr.Ack(tk)
	}
	select {
	case n := <-released:
		if n != resume-1 {
			t.Errorf("released with %d in flight, want %d", n, resume-1)
		}
	case <-ctx.Done():
		t.Fatal("the reader was not released below resume")
	}
}

// TestAckAllMatchesAck checks that acking runs of tickets under one lock moves the
// commit point, the in-flight count and the done count exactly as acking them one by
// one does, with runs in random order, duplicate and unknown tickets among them, and a
// waiter woken by a run.
func TestAckAllMatchesAck(t *testing.T) {
	tests := map[string]struct {
		fanOut func(r *rand.Rand) int
		order  func(r *rand.Rand, acks []sent)
	}{
		"in order":                {fanOut: one, order: func(*rand.Rand, []sent) {}},
		"random order":            {fanOut: one, order: shuffle},
		"reversed with drops":     {fanOut: func(r *rand.Rand) int { return r.IntN(2) }, order: reverse},
		"fan out 1 to N shuffled": {fanOut: func(r *rand.Rand) int { return r.IntN(4) }, order: shuffle},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(2, uint64(len(name))))
			single, batched := New(16), New(16)
			var acks []sent
			for off := int64(0); off < 3000; off++ {
				n := tc.fanOut(r)
				tk := single.Add(off, n)
				if tk2 := batched.Add(off, n); tk2 != tk {
					t.Fatalf("tickets differ: %d and %d", tk, tk2)
				}
				for range n {
					acks = append(acks, sent{off, tk})
				}
			}
			tc.order(r, acks)
			for len(acks) > 0 {
				run := acks[:min(len(acks), 1+r.IntN(200))]
				acks = acks[len(run):]
				tks := make([]Ticket, 0, len(run)+2)
				wantDone := 0
				for _, a := range run {
					tks = append(tks, a.ticket)
					if single.Ack(a.ticket) {
						wantDone++
					}
				}
				// Unknown tickets are ignored, as by Ack.
				tks = append(tks, Ticket(1<<40), tks[0])
				if single.Ack(tks[0]) {
					wantDone++
				}
				if got := batched.AckAll(tks); got != wantDone {
					t.Fatalf("AckAll done %d records, Ack one by one %d", got, wantDone)
				}
				if got, want := mustPoint(t, batched), mustPoint(t, single); got != want {
					t.Fatalf("commit point %d after AckAll, %d after Ack", got, want)
				}
				if got, want := batched.InFlight(), single.InFlight(); got != want {
					t.Fatalf("in flight %d after AckAll, %d after Ack", got, want)
				}
			}
			if got := batched.InFlight(); got != 0 {
				t.Fatalf("in flight after all acks = %d, want 0", got)
			}
		})
	}
	t.Run("wakes a waiter", func(t *testing.T) {
		tr := New(16)
		var tks []Ticket
		for off := range int64(10) {
			tks = append(tks, tr.Add(off, 1))
		}
		woken := make(chan error, 1)
		go func() { woken <- tr.WaitBelow(context.Background(), 1) }()
		time.Sleep(10 * time.Millisecond) // let it wait; it returns correctly either way
		tr.AckAll(tks)
		select {
		case err := <-woken:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the waiter was not woken by AckAll")
		}
	})
}
