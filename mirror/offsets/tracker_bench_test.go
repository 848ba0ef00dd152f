package offsets

import (
	"fmt"
	"testing"
)

// BenchmarkTracker keeps n records in flight and, per iteration, reads one record and
// acks one: in order (the common case) or out of order (every ack lands in the middle
// of the window). ns/op must stay flat as n grows and allocs/op must be 0.
func BenchmarkTracker(b *testing.B) {
	for _, n := range []int{100, 1000, 10000, 100000} {
		for _, order := range []string{"in-order", "out-of-order"} {
			b.Run(fmt.Sprintf("inflight=%d/%s", n, order), func(b *testing.B) {
				tr := New(n)
				window := make([]Ticket, n)
				off := int64(0)
				for i := range window {
					window[i] = tr.Add(off, 1)
					off++
				}
				step := 1
				if order == "out-of-order" {
					// A stride coprime with n visits every slot but acks far from the head.
					step = n/2 + 1
					for gcd(step, n) != 1 {
						step++
					}
				}
				slot := 0
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					tr.Ack(window[slot])
					window[slot] = tr.Add(off, 1)
					off++
					slot = (slot + step) % n
					tr.CommitPoint()
				}
			})
		}
	}
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}
