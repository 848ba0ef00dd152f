package handler

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// FuzzNewChain feeds arbitrary expressions to the CEL compiler and, when they compile,
// runs them on a record: neither may panic, every compile error must be a *FieldError
// under handlers[0], and evaluation must respect the cost limit and deadline.
func FuzzNewChain(f *testing.F) {
	for _, seed := range [][2]string{
		{"!('skip' in record.headers)", ""},
		{"has(record.headers.skip) == false", "record.value"},
		{"json(record.value).region == 'eu'", "toJSON(json(record.value))"},
		{"record.topic.matches('^orders')", "'k-' + string(record.key)"},
		{"record.headerList.exists(h, h.key == 'x')", "null"},
		{"size(record.headers) > 0 ? true : false", "b'\\x00\\xff'"},
		{"[1,2,3].map(x, x * 2).size() == 3", "string(record.partition)"},
		{"record.timestamp > timestamp('2020-01-01T00:00:00Z')", "base64.decode('AP8=')"},
		{"record.topik", ""},
		{"record.topic ==", "((("},
		{"'\\xff'", "json(b'{')"},
		{"", "1"},
		{"true", ""},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, filter, value string) {
		spec := config.CELHandler{Filter: filter, OnError: config.OnErrorSkip}
		if value != "" {
			spec.Transform = &config.CELTransform{Value: value}
		}
		h, err := NewChain([]config.HandlerSpec{{CEL: &spec}}, WithCostLimit(10_000), WithEvalTimeout(20*time.Millisecond))
		if err != nil {
			for _, fe := range FieldErrors(err) {
				if !strings.HasPrefix(fe.Field, "handlers[0].cel") {
					t.Fatalf("error %q is not under handlers[0].cel", fe.Error())
				}
			}
			return
		}
		start := time.Now()
		out, err := h.Handle(context.Background(), sampleRecord(), nil)
		if err != nil && !IsSkip(err) {
			t.Fatalf("with onError: skip, a run-time error must be a skip: %v", err)
		}
		if err == nil && len(out) > 1 {
			t.Fatalf("a CEL step emitted %d records", len(out))
		}
		if took := time.Since(start); took > 15*time.Second {
			t.Fatalf("evaluation took %v despite the cost limit and deadline", took)
		}
	})
}
