package handler

import (
	"bytes"
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// sampleRecord is the record most CEL cases run on: a JSON value, a key, duplicate
// headers and every metadata field set.
func sampleRecord() *Record {
	return &Record{
		Topic:     "orders",
		Partition: 3,
		Offset:    42,
		Timestamp: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		Key:       []byte("k1"),
		Value:     []byte(`{"id":12345,"region":"eu","amount":12.5,"items":[{"sku":"a"},{"sku":"b"}]}`),
		Headers: []Header{
			{Key: "skip", Value: []byte("0")},
			{Key: "trace", Value: []byte("abc")},
			{Key: "skip", Value: []byte("1")},
		},
	}
}

func celChain(t testing.TB, spec config.CELHandler, opts ...ChainOption) Handler {
	t.Helper()
	h, err := NewChain([]config.HandlerSpec{{CEL: &spec}}, opts...)
	if err != nil {
		t.Fatalf("NewChain: %v", err)
	}
	return h
}

// withProvenance adds the engine's provenance header with value path to a record.
func withProvenance(path string) func(*Record) {
	return func(r *Record) {
		r.Headers = append(r.Headers, Header{Key: "kafka-mirror-provenance", Value: []byte(path)})
	}
}

func TestCELFilter(t *testing.T) {
	tests := map[string]struct {
		filter string
		record func(*Record)
		keep   bool
	}{
		"header present":                {filter: "!('skip' in record.headers)", keep: false},
		"header absent":                 {filter: "!('skip' in record.headers)", record: func(r *Record) { r.Headers = r.Headers[1:2] }, keep: true},
		"no headers at all":             {filter: "!('skip' in record.headers)", record: func(r *Record) { r.Headers = nil }, keep: true},
		"has() on a header":             {filter: "has(record.headers.trace)", keep: true},
		"duplicate header: last wins":   {filter: "record.headers.skip == b'1'", keep: true},
		"duplicate header counted once": {filter: "size(record.headers) == 2", keep: true},
		"header list keeps duplicates":  {filter: "record.headerList.size() == 3 && record.headerList[0].value == b'0'", keep: true},
		"header iteration":              {filter: "record.headers.all(k, k in ['skip', 'trace'])", keep: true},
		"header value as string":        {filter: "string(record.headers.trace).startsWith('ab')", keep: true},
		"key as string":                 {filter: "string(record.key) == 'k1'", keep: true},
		"null key is not set":           {filter: "has(record.key)", record: func(r *Record) { r.Key = nil }, keep: false},
		"null key reads as empty":       {filter: "record.key == b''", record: func(r *Record) { r.Key = nil }, keep: true},
		"empty key is set":              {filter: "has(record.key)", record: func(r *Record) { r.Key = []byte{} }, keep: true},
		"tombstone dropped":             {filter: "has(record.value)", record: func(r *Record) { r.Value = nil }, keep: false},
		"non-tombstone kept":            {filter: "has(record.value)", keep: true},
		"binary value":                  {filter: "record.value == b'\\x00\\xff' && base64.encode(record.value) == 'AP8='", record: func(r *Record) { r.Value = []byte{0, 0xff} }, keep: true},
		"binary value size":             {filter: "record.value.size() == 2", record: func(r *Record) { r.Value = []byte{0, 0xff} }, keep: true},
		"JSON string field":             {filter: "json(record.value).region == 'eu'", keep: true},
		"JSON string field mismatch":    {filter: "json(record.value).region == 'us'", keep: false},
		"JSON integer is an int":        {filter: "json(record.value).id == 12345 && type(json(record.value).id) == int", keep: true},
		"JSON fraction is a double":     {filter: "json(record.value).amount > 10 && type(json(record.value).amount) == double", keep: true},
		"JSON nested list":              {filter: "json(record.value).items.exists(i, i.sku == 'b')", keep: true},
		"JSON optional field":           {filter: "has(json(record.value).coupon)", keep: false},
		"JSON from a string":            {filter: "json('[1,2]').size() == 2", keep: true},
		"cel.bind parses once":          {filter: "cel.bind(v, json(record.value), v.region == 'eu' && v.id > 0)", keep: true},
		"metadata":                      {filter: "record.topic == 'orders' && record.partition == 3 && record.offset == 42", keep: true},
		"timestamp":                     {filter: "record.timestamp == timestamp('2026-01-02T03:04:05Z')", keep: true},
		"string extensions":             {filter: "record.topic.upperAscii() == 'ORDERS'", keep: true},
		"regex on topic":                {filter: "record.topic.matches('^ord')", keep: true},
		"record through dyn":            {filter: "dyn(record).topic == 'orders'", keep: true},

		// The engine's loop prevention (provenance) header, as a handler sees it: the
		// clusters a record was mirrored from, comma-separated, oldest first.
		"provenance: only local records": {filter: "!('kafka-mirror-provenance' in record.headers)", record: withProvenance("dc1"), keep: false},
		"provenance: a local record":     {filter: "!('kafka-mirror-provenance' in record.headers)", keep: true},
		"provenance: origin":             {filter: "string(record.headers['kafka-mirror-provenance']).split(',')[0] == 'dc1'", record: withProvenance("dc1,dc2"), keep: true},
		"provenance: hop count":          {filter: "string(record.headers['kafka-mirror-provenance']).split(',').size() < 2", record: withProvenance("dc1,dc2"), keep: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := celChain(t, config.CELHandler{Filter: tc.filter})
			r := sampleRecord()
			if tc.record != nil {
				tc.record(r)
			}
			out, err := h.Handle(context.Background(), r, nil)
			if err != nil {
				t.Fatalf("Handle: %v", err)
			}
			if got := len(out) == 1; got != tc.keep {
				t.Fatalf("kept = %v, want %v", got, tc.keep)
			}
			if tc.keep && out[0] != r {
				t.Fatalf("a filter must emit the record itself")
			}
		})
	}
}

func TestCELTransform(t *testing.T) {
	tests := map[string]struct {
		transform config.CELTransform
		filter    string
		record    func(*Record)
		want      func(*Record) // applied to sampleRecord() to get the expected output
		dropped   bool
	}{
		"key from string": {
			transform: config.CELTransform{Key: "'k-' + string(record.key)"},
			want:      func(r *Record) { r.Key = []byte("k-k1") },
		},
		"key to null": {
			transform: config.CELTransform{Key: "null"},
			want:      func(r *Record) { r.Key = nil },
		},
		"null key kept null": {
			transform: config.CELTransform{Key: "record.key"},
			record:    func(r *Record) { r.Key = nil },
			want:      func(r *Record) { r.Key = nil },
		},
		"key from JSON field": {
			transform: config.CELTransform{Key: "string(json(record.value).id)"},
			want:      func(r *Record) { r.Key = []byte("12345") },
		},
		"value to JSON": {
			transform: config.CELTransform{Value: "toJSON({'id': json(record.value).id, 'topic': record.topic, 'raw': record.key})"},
			want:      func(r *Record) { r.Value = []byte(`{"id":12345,"raw":"azE=","topic":"orders"}`) },
		},
		"value to tombstone when empty": {
			transform: config.CELTransform{Value: "record.value.size() > 0 ? dyn(record.value) : null"},
			record:    func(r *Record) { r.Value = []byte{} },
			want:      func(r *Record) { r.Value = nil },
		},
		"tombstone stays a tombstone": {
			transform: config.CELTransform{Topic: "'audit'"},
			record:    func(r *Record) { r.Value = nil },
			want:      func(r *Record) { r.Value = nil; r.Topic = "audit" },
		},
		"binary value": {
			transform: config.CELTransform{Value: "b'\\x00' + record.value"},
			record:    func(r *Record) { r.Value = []byte{0xff} },
			want:      func(r *Record) { r.Value = []byte{0, 0xff} },
		},
		"headers from a map, sorted": {
			transform: config.CELTransform{Headers: "{'b': 'text', 'a': b'\\x01', 'n': null}"},
			want: func(r *Record) {
				r.Headers = []Header{{Key: "a", Value: []byte{1}}, {Key: "b", Value: []byte("text")}, {Key: "n"}}
			},
		},
		"headers from the map view: duplicates collapse": {
			transform: config.CELTransform{Headers: "record.headers"},
			want: func(r *Record) {
				r.Headers = []Header{{Key: "skip", Value: []byte("1")}, {Key: "trace", Value: []byte("abc")}}
			},
		},
		"headers from the list view, filtered": {
			transform: config.CELTransform{Headers: "record.headerList.filter(h, h.key != 'trace')"},
			want: func(r *Record) {
				r.Headers = []Header{{Key: "skip", Value: []byte("0")}, {Key: "skip", Value: []byte("1")}}
			},
		},
		"headers from pairs, order and duplicates kept": {
			transform: config.CELTransform{Headers: "[['z', 'a'], ['z', b'b'], ['y', null]]"},
			want: func(r *Record) {
				r.Headers = []Header{{Key: "z", Value: []byte("a")}, {Key: "z", Value: []byte("b")}, {Key: "y"}}
			},
		},
		"header added to the list": {
			transform: config.CELTransform{Headers: "record.headerList + [{'key': 'mirrored', 'value': 'yes'}]"},
			want: func(r *Record) {
				r.Headers = append(r.Headers, Header{Key: "mirrored", Value: []byte("yes")})
			},
		},
		"topic": {
			transform: config.CELTransform{Topic: "'audit.' + record.topic"},
			want:      func(r *Record) { r.Topic = "audit.orders" },
		},
		"partition": {
			transform: config.CELTransform{Partition: "record.partition + 1"},
			want:      func(r *Record) { r.Partition = 4 },
		},
		"every transform sees the input record": {
			transform: config.CELTransform{Key: "record.topic", Topic: "'renamed'", Value: "record.topic"},
			want:      func(r *Record) { r.Key = []byte("orders"); r.Value = []byte("orders"); r.Topic = "renamed" },
		},
		"filter true then transform": {
			filter:    "json(record.value).region == 'eu'",
			transform: config.CELTransform{Topic: "'orders-eu'"},
			want:      func(r *Record) { r.Topic = "orders-eu" },
		},
		"filter false skips the transform": {
			filter:    "json(record.value).region == 'us'",
			transform: config.CELTransform{Topic: "'orders-us'"},
			dropped:   true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			tr := tc.transform
			h := celChain(t, config.CELHandler{Filter: tc.filter, Transform: &tr})
			in, want := sampleRecord(), sampleRecord()
			if tc.record != nil {
				tc.record(in)
				tc.record(want)
			}
			out, err := h.Handle(context.Background(), in, nil)
			if err != nil {
				t.Fatalf("Handle: %v", err)
			}
			if tc.dropped {
				if len(out) != 0 {
					t.Fatalf("emitted %d records, want none", len(out))
				}
				return
			}
			if len(out) != 1 {
				t.Fatalf("emitted %d records, want 1", len(out))
			}
			tc.want(want)
			assertRecord(t, out[0], want)
		})
	}
}

// assertRecord compares records field by field, telling null from empty.
func assertRecord(t *testing.T, got, want *Record) {
	t.Helper()
	if got.Topic != want.Topic || got.Partition != want.Partition || got.Offset != want.Offset || !got.Timestamp.Equal(want.Timestamp) {
		t.Errorf("metadata = %s/%d@%d %v, want %s/%d@%d %v", got.Topic, got.Partition, got.Offset, got.Timestamp, want.Topic, want.Partition, want.Offset, want.Timestamp)
	}
	sameBytes := func(what string, g, w []byte) {
		if (g == nil) != (w == nil) || !bytes.Equal(g, w) {
			t.Errorf("%s = %q (null %v), want %q (null %v)", what, g, g == nil, w, w == nil)
		}
	}
	sameBytes("key", got.Key, want.Key)
	sameBytes("value", got.Value, want.Value)
	if len(got.Headers) != len(want.Headers) {
		t.Fatalf("headers = %q, want %q", got.Headers, want.Headers)
	}
	for i := range got.Headers {
		if got.Headers[i].Key != want.Headers[i].Key {
			t.Errorf("headers[%d].key = %q, want %q", i, got.Headers[i].Key, want.Headers[i].Key)
		}
		sameBytes("headers["+got.Headers[i].Key+"]", got.Headers[i].Value, want.Headers[i].Value)
	}
}

func TestCELCompileErrors(t *testing.T) {
	tests := map[string]struct {
		spec config.CELHandler
		want string
	}{
		"undefined field": {
			spec: config.CELHandler{Filter: "record.topik == 'x'"},
			want: "handlers[0].cel.filter: 1:7: undefined field 'topik'\n | record.topik == 'x'\n | ......^",
		},
		"undeclared variable": {
			spec: config.CELHandler{Filter: "rec.topic == 'x'"},
			want: "handlers[0].cel.filter: 1:1: undeclared reference to 'rec' (in container '')\n | rec.topic == 'x'\n | ^",
		},
		"syntax error": {
			spec: config.CELHandler{Filter: "record.topic =="},
			want: "handlers[0].cel.filter: 1:16: Syntax error: mismatched input '<EOF>' expecting {'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}\n | record.topic ==\n | ...............^",
		},
		"filter not bool": {
			spec: config.CELHandler{Filter: "record.partition"},
			want: "handlers[0].cel.filter: must give bool, not int",
		},
		"bad regex literal": {
			spec: config.CELHandler{Filter: "record.topic.matches('(')"},
			want: "handlers[0].cel.filter: 1:22: invalid matches argument\n | record.topic.matches('(')\n | .....................^",
		},
		"topic not a string": {
			spec: config.CELHandler{Transform: &config.CELTransform{Topic: "record.partition"}},
			want: "handlers[0].cel.transform.topic: must give string, not int",
		},
		"value not bytes": {
			spec: config.CELHandler{Transform: &config.CELTransform{Value: "1.5"}},
			want: "handlers[0].cel.transform.value: must give bytes, string or null, not double",
		},
		"partition not int": {
			spec: config.CELHandler{Transform: &config.CELTransform{Partition: "'1'"}},
			want: "handlers[0].cel.transform.partition: must give int, not string",
		},
		"headers not a map or list": {
			spec: config.CELHandler{Transform: &config.CELTransform{Headers: "record.key"}},
			want: "handlers[0].cel.transform.headers: must give a map(string, bytes|string|null) or a list of [key, value] pairs or {key, value} maps, not bytes",
		},
		"several expressions wrong at once": {
			spec: config.CELHandler{Filter: "1", Transform: &config.CELTransform{Key: "true"}},
			want: "handlers[0].cel.filter: must give bool, not int\nhandlers[0].cel.transform.key: must give bytes, string or null, not bool",
		},
		"nothing to do": {
			spec: config.CELHandler{Transform: &config.CELTransform{}},
			want: "handlers[0].cel: set filter and/or transform",
		},
		"bad onError": {
			spec: config.CELHandler{Filter: "true", OnError: "retry"},
			want: `handlers[0].cel.onError: "retry" is not fail or skip`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			spec := tc.spec
			_, err := NewChain([]config.HandlerSpec{{CEL: &spec}})
			if err == nil {
				t.Fatal("NewChain succeeded, want an error")
			}
			if err.Error() != tc.want {
				t.Fatalf("error =\n%s\nwant\n%s", err, tc.want)
			}
		})
	}
}

func TestCELRuntimeErrors(t *testing.T) {
	tests := map[string]struct {
		spec   config.CELHandler
		record func(*Record)
		want   string
	}{
		"not JSON": {
			spec:   config.CELHandler{Filter: "json(record.value).region == 'eu'"},
			record: func(r *Record) { r.Value = []byte("hello") },
			want:   "while running handlers[0] on orders/3@42: handlers[0].cel.filter: json: invalid character 'h' looking for beginning of value",
		},
		"data after the JSON document": {
			spec:   config.CELHandler{Filter: "json(record.value) == 1"},
			record: func(r *Record) { r.Value = []byte("1 }") },
			want:   "while running handlers[0] on orders/3@42: handlers[0].cel.filter: json: unexpected data after the JSON value",
		},
		"missing JSON field": {
			spec: config.CELHandler{Filter: "json(record.value).coupon == 'x'"},
			want: "while running handlers[0] on orders/3@42: handlers[0].cel.filter: no such key: coupon",
		},
		"missing header": {
			spec: config.CELHandler{Filter: "record.headers.region == b'eu'"},
			want: "while running handlers[0] on orders/3@42: handlers[0].cel.filter: no such key: region",
		},
		"invalid UTF-8": {
			spec:   config.CELHandler{Filter: "string(record.value) == 'x'"},
			record: func(r *Record) { r.Value = []byte{0xff} },
			want:   "while running handlers[0] on orders/3@42: handlers[0].cel.filter: invalid UTF-8 in bytes, cannot convert to string",
		},
		"dyn filter not bool": {
			spec: config.CELHandler{Filter: "json(record.value).region"},
			want: "while running handlers[0] on orders/3@42: handlers[0].cel.filter: gave string, not bool",
		},
		"invalid topic": {
			spec: config.CELHandler{Transform: &config.CELTransform{Topic: "'bad topic!'"}},
			want: `while running handlers[0] on orders/3@42: handlers[0].cel.transform.topic: gave "bad topic!", which is not a valid Kafka topic name`,
		},
		"negative partition": {
			spec: config.CELHandler{Transform: &config.CELTransform{Partition: "record.partition - 10"}},
			want: "while running handlers[0] on orders/3@42: handlers[0].cel.transform.partition: gave -7, which is not a partition number",
		},
		"dyn value of the wrong type": {
			spec: config.CELHandler{Transform: &config.CELTransform{Value: "json(record.value).id"}},
			want: "while running handlers[0] on orders/3@42: handlers[0].cel.transform.value: gave int, not bytes, string or null",
		},
		"bad header pair": {
			spec: config.CELHandler{Transform: &config.CELTransform{Headers: "[['a']]"}},
			want: "while running handlers[0] on orders/3@42: handlers[0].cel.transform.headers: headers[0]: a header pair must be [key, value]",
		},
		"bad header value": {
			spec: config.CELHandler{Transform: &config.CELTransform{Headers: "{'a': 1}"}},
			want: `while running handlers[0] on orders/3@42: handlers[0].cel.transform.headers: header "a": a header value gave int, not bytes, string or null`,
		},
		"toJSON of a map with int keys": {
			spec: config.CELHandler{Transform: &config.CELTransform{Value: "toJSON({1: 2})"}},
			want: "while running handlers[0] on orders/3@42: handlers[0].cel.transform.value: toJSON: a JSON object key must be a string, not int",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for _, policy := range []string{config.OnErrorFail, config.OnErrorSkip} {
				spec := tc.spec
				spec.OnError = policy
				h := celChain(t, spec)
				in := sampleRecord()
				if tc.record != nil {
					tc.record(in)
				}
				before := *in
				out, err := h.Handle(context.Background(), in, nil)
				if len(out) != 0 {
					t.Fatalf("%s: emitted %d records on error", policy, len(out))
				}
				if in.Topic != before.Topic || in.Partition != before.Partition || !bytes.Equal(in.Value, before.Value) {
					t.Fatalf("%s: a failed transform changed the record", policy)
				}
				switch policy {
				case config.OnErrorFail:
					if err == nil || IsSkip(err) || err.Error() != tc.want {
						t.Fatalf("fail: error = %v (skip %v), want %q", err, IsSkip(err), tc.want)
					}
				case config.OnErrorSkip:
					// The skip error names the step; its cause is the same evaluation error.
					cause := strings.TrimPrefix(tc.want, "while running handlers[0] on orders/3@42: ")
					want := "record skipped by handlers[0] (onError: skip): " + cause
					if !IsSkip(err) || err.Error() != want {
						t.Fatalf("skip: error = %v (skip %v), want %q", err, IsSkip(err), want)
					}
				}
			}
		})
	}
}

// A record is never skipped because the engine is shutting down: that would count it
// as done and commit past it without mirroring it.
func TestCELSkipNotOnShutdown(t *testing.T) {
	h := celChain(t, config.CELHandler{Filter: "json(record.value).x == 1", OnError: config.OnErrorSkip})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := sampleRecord()
	r.Value = []byte("not json")
	_, err := h.Handle(ctx, r, nil)
	if err == nil || IsSkip(err) {
		t.Fatalf("error = %v (skip %v), want a plain error", err, IsSkip(err))
	}
}

// A comprehension nested six deep runs a million times: the cost limit must stop it.
func TestCELCostLimitStopsPathologicalExpression(t *testing.T) {
	const digits = "[0,1,2,3,4,5,6,7,8,9]"
	expr := digits + ".all(a, " + digits + ".all(b, " + digits + ".all(c, " + digits + ".all(d, " +
		digits + ".all(e, " + digits + ".all(f, a + b + c + d + e + f >= 0))))))"
	h := celChain(t, config.CELHandler{Filter: expr}, WithEvalTimeout(0))
	start := time.Now()
	_, err := h.Handle(context.Background(), sampleRecord(), nil)
	took := time.Since(start)
	want := "while running handlers[0] on orders/3@42: handlers[0].cel.filter: operation cancelled: actual cost limit exceeded"
	if err == nil || err.Error() != want {
		t.Fatalf("error = %v, want %q", err, want)
	}
	if took > 15*time.Second {
		t.Fatalf("stopping took %v", took)
	}
}

// With the cost limit out of the way, the per-record deadline stops a loop of 10^10
// steps, which would otherwise run for hours.
func TestCELDeadlineStopsLongEvaluation(t *testing.T) {
	const digits = "[0,1,2,3,4,5,6,7,8,9]"
	expr := digits + ".all(a, " + digits + ".all(b, " + digits + ".all(c, " + digits + ".all(d, " +
		digits + ".all(e, " + digits + ".all(f, " + digits + ".all(g, " + digits + ".all(h, " +
		digits + ".all(i, " + digits + ".all(j, a + b + c + d + e + f + g + h + i + j >= 0))))))))))"
	h := celChain(t, config.CELHandler{Filter: expr}, WithCostLimit(math.MaxUint64), WithEvalTimeout(50*time.Millisecond))
	start := time.Now()
	_, err := h.Handle(context.Background(), sampleRecord(), nil)
	took := time.Since(start)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error = %v, want the deadline", err)
	}
	want := "while running handlers[0] on orders/3@42: handlers[0].cel.filter: operation interrupted: context deadline exceeded"
	if err.Error() != want {
		t.Fatalf("error = %q, want %q", err, want)
	}
	if took > 10*time.Second {
		t.Fatalf("stopping took %v, want about 50ms", took)
	}
}

// An expression whose static worst case fits the limit runs untracked for records
// within the estimate's bounds, and tracked (so the limit still holds) beyond them.
func TestCELCostLimitHoldsBeyondEstimateBounds(t *testing.T) {
	spec := config.CELHandler{Filter: "string(record.value).contains('x')", OnError: config.OnErrorFail}
	h := celChain(t, spec, WithCostLimit(300_000))
	step := h.(*single).step.h.(*celHandler)
	if step.filter.untracked == nil {
		t.Fatal("the filter's static worst case should fit 300000 and run untracked for small records")
	}
	small := sampleRecord()
	small.Value = []byte("xyz")
	if out, err := h.Handle(context.Background(), small, nil); err != nil || len(out) != 1 {
		t.Fatalf("small record: out %d, err %v", len(out), err)
	}
	big := sampleRecord()
	big.Value = bytes.Repeat([]byte("a"), 4*estimateMaxBytes)
	_, err := h.Handle(context.Background(), big, nil)
	want := "while running handlers[0] on orders/3@42: handlers[0].cel.filter: operation cancelled: actual cost limit exceeded"
	if err == nil || err.Error() != want {
		t.Fatalf("big record: error = %v, want %q", err, want)
	}
	// A filter over unbounded data (a JSON list) is always tracked.
	loop := celChain(t, config.CELHandler{Filter: "json(record.value).items.all(i, i.sku != '')"})
	if loop.(*single).step.h.(*celHandler).filter.untracked != nil {
		t.Fatal("a loop over JSON has no static bound and must be tracked")
	}
}

func TestCELSkipLogsOncePerInterval(t *testing.T) {
	var lines []string
	log := funcLogger(func(msg string, kv []any) { lines = append(lines, msg) })
	h := celChain(t, config.CELHandler{Filter: "json(record.value).x == 1", OnError: config.OnErrorSkip},
		WithLogger(log), WithSkipLogInterval(time.Hour))
	for i := 0; i < 100; i++ {
		r := sampleRecord()
		r.Value = []byte("nope")
		if _, err := h.Handle(context.Background(), r, nil); !IsSkip(err) {
			t.Fatalf("record %d: error %v, want a skip", i, err)
		}
	}
	if len(lines) != 1 || lines[0] != "Skipped records whose CEL evaluation failed (onError: skip)" {
		t.Fatalf("log lines = %q, want exactly one", lines)
	}
}
