package mirror

import "time"

// backoff is a capped doubling wait between attempts: min, 2*min, 4*min, ... up to
// max. The zero value is not usable; build one with newBackoff.
type backoff struct {
	min, max, cur time.Duration
}

func newBackoff(min, max time.Duration) backoff {
	return backoff{min: min, max: max, cur: min}
}

// next returns the wait before the next attempt and doubles the one after it.
func (b *backoff) next() time.Duration {
	d := b.cur
	b.cur = min(b.cur*2, b.max)
	return d
}

// reset starts again from min, after an attempt succeeded.
func (b *backoff) reset() { b.cur = b.min }
