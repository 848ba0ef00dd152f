package mirror

import (
	"slices"
	"testing"
	"time"
)

func TestBackoffDoublesUpToItsCapAndResets(t *testing.T) {
	tests := map[string]struct {
		min, max time.Duration
		want     []time.Duration
	}{
		"doubles then caps": {min: time.Second, max: 5 * time.Second, want: []time.Duration{1, 2, 4, 5, 5}},
		"min equals max":    {min: 3 * time.Second, max: 3 * time.Second, want: []time.Duration{3, 3, 3}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			b := newBackoff(tc.min, tc.max)
			var got []time.Duration
			for range tc.want {
				got = append(got, b.next()/time.Second)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("waits %v s, want %v s", got, tc.want)
			}
			b.reset()
			if d := b.next(); d != tc.min {
				t.Fatalf("after reset the wait is %v, want %v", d, tc.min)
			}
		})
	}
}
