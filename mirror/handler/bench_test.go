package handler

import (
	"context"
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// benchRecord is a small, typical record: a short key, a ~70-byte JSON value, one header.
func benchRecord() *Record {
	return &Record{
		Topic:     "orders",
		Partition: 3,
		Offset:    42,
		Timestamp: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Key:       []byte("order-12345"),
		Value:     []byte(`{"id":12345,"region":"eu","amount":12.5,"customer":"c-981"}`),
		Headers:   []Header{{Key: "trace", Value: []byte("4bf92f3577b34da6")}},
	}
}

func benchmarkChain(b *testing.B, specs []config.HandlerSpec) {
	h, err := NewChain(specs)
	if err != nil {
		b.Fatal(err)
	}
	r := benchRecord()
	ctx := context.Background()
	out := make([]*Record, 0, 4)
	b.ReportAllocs()
	for b.Loop() {
		out, err = h.Handle(ctx, r, out[:0])
		if err != nil || len(out) != 1 {
			b.Fatalf("out %d, err %v", len(out), err)
		}
	}
}

// BenchmarkCELFilter measures the filters the issue names; a typical one must stay
// under 2 µs per record.
func BenchmarkCELFilter(b *testing.B) {
	for name, filter := range map[string]string{
		"header-absent":        "!('skip' in record.headers)",
		"header-has-false":     "has(record.headers.skip) == false",
		"json-field":           "json(record.value).region == 'eu'",
		"topic-and-key-prefix": "record.topic == 'orders' && string(record.key).startsWith('order-')",
	} {
		b.Run(name, func(b *testing.B) {
			benchmarkChain(b, []config.HandlerSpec{{CEL: &config.CELHandler{Filter: filter, OnError: config.OnErrorFail}}})
		})
	}
}

func BenchmarkCELTransform(b *testing.B) {
	b.Run("topic", func(b *testing.B) {
		// The record is re-used, so the transform must be idempotent: set, not prefix.
		benchmarkChain(b, []config.HandlerSpec{{CEL: &config.CELHandler{Transform: &config.CELTransform{Topic: "'audit'"}}}})
	})
}

func BenchmarkNamedHandlers(b *testing.B) {
	b.Run("pass-through", func(b *testing.B) { benchmarkChain(b, nil) })
	b.Run("header-filter", func(b *testing.B) {
		benchmarkChain(b, []config.HandlerSpec{{Name: "header-filter", Args: map[string]string{"mode": "drop", "header": "skip"}}})
	})
	b.Run("chain-of-three", func(b *testing.B) {
		benchmarkChain(b, []config.HandlerSpec{
			{Name: "identity"},
			{CEL: &config.CELHandler{Filter: "!('skip' in record.headers)"}},
			{Name: "header-filter", Args: map[string]string{"mode": "drop", "header": "skip"}},
		})
	})
}
