package mirror

import (
	"bytes"
	"testing"
)

// TestHeaderKeyViews: the zero-copy views keep every header key byte for byte, and an
// empty key stays empty rather than becoming a null key on the target.
func TestHeaderKeyViews(t *testing.T) {
	tests := map[string]struct {
		key []byte
	}{
		"ascii":  {key: []byte("skip")},
		"binary": {key: []byte{0, 0xff, 'k', 0x80}},
		"empty":  {key: []byte{}},
		"nil":    {key: nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := headerKeyString(tc.key)
			if s != string(tc.key) {
				t.Fatalf("headerKeyString(%q) = %q", tc.key, s)
			}
			b := headerKeyBytes(s)
			if !bytes.Equal(b, tc.key) {
				t.Fatalf("headerKeyBytes(%q) = %q, want %q", s, b, tc.key)
			}
			if b == nil {
				t.Fatalf("headerKeyBytes(%q) = nil: sarama would encode a null key", s)
			}
		})
	}
	// A key a handler built (not a view of fetched bytes) converts the same way.
	if got := headerKeyBytes("region" + "-eu"); string(got) != "region-eu" {
		t.Fatalf("headerKeyBytes of a built string = %q", got)
	}
}
