package mirror

import (
	"strings"
	"testing"
)

func TestCheckpointMetadata(t *testing.T) {
	written := CheckpointMetadata{Mirror: "kafka-mirror.default.orders", At: 1764740000123, SourceTopic: "orders.eu", SourceOffset: 42}
	tests := map[string]struct {
		metadata string
		want     CheckpointMetadata
		ok       bool
	}{
		"written by a checkpoint":     {metadata: written.String(), want: written, ok: true},
		"a consumer's own commit":     {metadata: ""},
		"an older engine's free text": {metadata: "kafka-mirror translation of orders.eu/0 offset 42"},
		"prefix but no JSON":          {metadata: checkpointMetadataPrefix + "{"},
		"no mirror":                   {metadata: checkpointMetadataPrefix + `{"at":5}`},
		"no time":                     {metadata: checkpointMetadataPrefix + `{"mirror":"m"}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := ParseCheckpointMetadata(tc.metadata)
			if ok != tc.ok || got != tc.want {
				t.Fatalf("ParseCheckpointMetadata(%q) = %+v, %v; want %+v, %v", tc.metadata, got, ok, tc.want, tc.ok)
			}
		})
	}
	if got := written.Time().UnixMilli(); got != written.At {
		t.Fatalf("Time() = %d ms, want %d", got, written.At)
	}
	// Kafka's default offset.metadata.max.bytes is 4096: the longest group and topic
	// names (255 and 249 characters) still fit.
	long := CheckpointMetadata{Mirror: strings.Repeat("g", 255), At: written.At, SourceTopic: strings.Repeat("t", 249), SourceOffset: 1 << 62}
	if n := len(long.String()); n > 1024 {
		t.Fatalf("metadata of the longest names is %d bytes; want well under 4096", n)
	}
}
