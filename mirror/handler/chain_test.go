package handler

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// fanOut is a test handler that emits `copies` records per input, each to topic
// "<topic>.<i>", to check 1->N through the chain.
type fanOut struct{ copies int }

func (f fanOut) Handle(_ context.Context, in *Record, out []*Record) ([]*Record, error) {
	for i := 0; i < f.copies; i++ {
		r := *in
		r.Topic = in.Topic + "." + strconv.Itoa(i)
		out = append(out, &r)
	}
	return out, nil
}

// failing is a test handler whose every call fails.
type failing struct{}

func (failing) Handle(context.Context, *Record, []*Record) ([]*Record, error) {
	return nil, errors.New("boom")
}

func init() {
	Register("test-fan-out", func(args map[string]string) (Handler, error) {
		if err := CheckArgs(args, []string{"copies"}, nil); err != nil {
			return nil, err
		}
		n, err := strconv.Atoi(args["copies"])
		if err != nil || n < 0 {
			return nil, &ArgError{Arg: "copies", Detail: fmt.Sprintf("%q is not a non-negative integer", args["copies"])}
		}
		return fanOut{copies: n}, nil
	})
	Register("test-failing", func(map[string]string) (Handler, error) { return failing{}, nil })
	Register("test-panicking-factory", func(map[string]string) (Handler, error) { panic("bad factory") })
	Register("test-plain-error", func(map[string]string) (Handler, error) { return nil, errors.New("no database") })
}

func topics(rs []*Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Topic
	}
	return out
}

func TestNamedHandlers(t *testing.T) {
	withHeaders := func(hs ...Header) *Record { return &Record{Topic: "orders.eu", Key: []byte("k"), Headers: hs} }
	tests := map[string]struct {
		spec config.HandlerSpec
		in   *Record
		want []string // topics emitted
	}{
		"identity": {
			spec: config.HandlerSpec{Name: "identity"},
			in:   withHeaders(), want: []string{"orders.eu"},
		},
		"header-filter drop: present": {
			spec: config.HandlerSpec{Name: "header-filter", Args: map[string]string{"mode": "drop", "header": "skip"}},
			in:   withHeaders(Header{Key: "skip"}), want: []string{},
		},
		"header-filter drop: absent": {
			spec: config.HandlerSpec{Name: "header-filter", Args: map[string]string{"mode": "drop", "header": "skip"}},
			in:   withHeaders(Header{Key: "other"}), want: []string{"orders.eu"},
		},
		"header-filter keep: value matches a duplicate": {
			spec: config.HandlerSpec{Name: "header-filter", Args: map[string]string{"mode": "keep", "header": "region", "value": "eu"}},
			in:   withHeaders(Header{Key: "region", Value: []byte("us")}, Header{Key: "region", Value: []byte("eu")}), want: []string{"orders.eu"},
		},
		"header-filter keep: other value": {
			spec: config.HandlerSpec{Name: "header-filter", Args: map[string]string{"mode": "keep", "header": "region", "value": "eu"}},
			in:   withHeaders(Header{Key: "region", Value: []byte("us")}), want: []string{},
		},
		"header-filter keep: an empty value matches only empty values": {
			spec: config.HandlerSpec{Name: "header-filter", Args: map[string]string{"mode": "keep", "header": "region", "value": ""}},
			in:   withHeaders(Header{Key: "region", Value: []byte("eu")}), want: []string{},
		},
		"topic-router on topic with groups": {
			spec: config.HandlerSpec{Name: "topic-router", Args: map[string]string{"pattern": `orders\.(eu|us)`, "topic": "orders-$1"}},
			in:   withHeaders(), want: []string{"orders-eu"},
		},
		"topic-router needs a whole match": {
			spec: config.HandlerSpec{Name: "topic-router", Args: map[string]string{"pattern": `orders`, "topic": "x"}},
			in:   withHeaders(), want: []string{"orders.eu"},
		},
		"topic-router on key": {
			spec: config.HandlerSpec{Name: "topic-router", Args: map[string]string{"on": "key", "pattern": "k", "topic": "by-key"}},
			in:   withHeaders(), want: []string{"by-key"},
		},
		"topic-router on header, named group": {
			spec: config.HandlerSpec{Name: "topic-router", Args: map[string]string{"on": "header:region", "pattern": "(?P<r>[a-z]+)-1", "topic": "orders-${r}"}},
			in:   withHeaders(Header{Key: "region", Value: []byte("eu-1")}), want: []string{"orders-eu"},
		},
		"topic-router on missing header": {
			spec: config.HandlerSpec{Name: "topic-router", Args: map[string]string{"on": "header:region", "pattern": ".*", "topic": "x"}},
			in:   withHeaders(), want: []string{"orders.eu"},
		},
		"fan-out 1->2": {
			spec: config.HandlerSpec{Name: "test-fan-out", Args: map[string]string{"copies": "2"}},
			in:   withHeaders(), want: []string{"orders.eu.0", "orders.eu.1"},
		},
		"fan-out 1->0": {
			spec: config.HandlerSpec{Name: "test-fan-out", Args: map[string]string{"copies": "0"}},
			in:   withHeaders(), want: []string{},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h, err := NewChain([]config.HandlerSpec{tc.spec})
			if err != nil {
				t.Fatalf("NewChain: %v", err)
			}
			out, err := h.Handle(context.Background(), tc.in, nil)
			if err != nil {
				t.Fatalf("Handle: %v", err)
			}
			if got := topics(out); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("emitted %q, want %q", got, tc.want)
			}
		})
	}
}

func TestNewChainErrors(t *testing.T) {
	tests := map[string]struct {
		specs []config.HandlerSpec
		opts  []ChainOption
		want  string
	}{
		"unknown handler": {
			specs: []config.HandlerSpec{{Name: "x"}},
			want:  `handlers[0].name: unknown handler "x" (registered: identity, header-filter, topic-router, test-fan-out, test-failing, test-panicking-factory, test-plain-error)`,
		},
		"neither cel nor name": {
			specs: []config.HandlerSpec{{Name: "identity"}, {}},
			want:  "handlers[1]: set cel or name",
		},
		"both cel and name": {
			specs: []config.HandlerSpec{{Name: "identity", CEL: &config.CELHandler{Filter: "true"}}},
			want:  "handlers[0]: set cel or name, not both",
		},
		"args on cel": {
			specs: []config.HandlerSpec{{CEL: &config.CELHandler{Filter: "true"}, Args: map[string]string{"a": "b"}}},
			want:  "handlers[0].args: args are for named handlers",
		},
		"identity takes no args": {
			specs: []config.HandlerSpec{{Name: "identity", Args: map[string]string{"x": "1"}}},
			want:  "handlers[0].args.x: unknown argument (accepted: none)",
		},
		"header-filter without mode": {
			specs: []config.HandlerSpec{{Name: "header-filter", Args: map[string]string{"header": "h"}}},
			want:  "handlers[0].args.mode: required",
		},
		"header-filter bad mode": {
			specs: []config.HandlerSpec{{Name: "header-filter", Args: map[string]string{"mode": "maybe", "header": "h"}}},
			want:  `handlers[0].args.mode: "maybe" is not keep or drop`,
		},
		"header-filter misspelt arg": {
			specs: []config.HandlerSpec{{Name: "header-filter", Args: map[string]string{"mode": "keep", "header": "h", "vaule": "x"}}},
			want:  "handlers[0].args.vaule: unknown argument (accepted: header, mode, value)",
		},
		"topic-router bad pattern": {
			specs: []config.HandlerSpec{{Name: "identity"}, {Name: "topic-router", Args: map[string]string{"pattern": "a(", "topic": "t"}}},
			want:  "handlers[1].args.pattern: error parsing regexp: missing closing ): `a(`",
		},
		"topic-router bad topic": {
			specs: []config.HandlerSpec{{Name: "topic-router", Args: map[string]string{"pattern": "a", "topic": "no spaces"}}},
			want:  `handlers[0].args.topic: "no spaces" is not a valid Kafka topic name (letters, digits, '.', '_', '-'; at most 249)`,
		},
		"topic-router bad on": {
			specs: []config.HandlerSpec{{Name: "topic-router", Args: map[string]string{"pattern": "a", "topic": "t", "on": "value"}}},
			want:  `handlers[0].args.on: "value" is not topic, key or header:NAME`,
		},
		"test handler bad arg": {
			specs: []config.HandlerSpec{{Name: "test-fan-out", Args: map[string]string{"copies": "two"}}},
			want:  `handlers[0].args.copies: "two" is not a non-negative integer`,
		},
		"factory panics": {
			specs: []config.HandlerSpec{{Name: "test-panicking-factory"}},
			want:  "handlers[0].args: the factory panicked: bad factory",
		},
		"factory returns a plain error": {
			specs: []config.HandlerSpec{{Name: "test-plain-error"}},
			want:  "handlers[0].args: no database",
		},
		"every problem at once, under a custom root": {
			specs: []config.HandlerSpec{
				{Name: "nope"},
				{CEL: &config.CELHandler{Filter: "record.nope"}},
				{Name: "header-filter"},
			},
			opts: []ChainOption{WithFieldPath("spec.handlers")},
			want: `spec.handlers[0].name: unknown handler "nope" (registered: identity, header-filter, topic-router, test-fan-out, test-failing, test-panicking-factory, test-plain-error)` + "\n" +
				"spec.handlers[1].cel.filter: 1:7: undefined field 'nope'\n | record.nope\n | ......^\n" +
				"spec.handlers[2].args.mode: required",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := NewChain(tc.specs, tc.opts...)
			if err == nil {
				t.Fatal("NewChain succeeded, want an error")
			}
			if err.Error() != tc.want {
				t.Fatalf("error =\n%s\nwant\n%s", err, tc.want)
			}
			// Every problem is a *FieldError whose path starts the line.
			for _, fe := range FieldErrors(err) {
				if fe.Field == "" || !strings.Contains(tc.want, fe.Field+": "+fe.Detail) {
					t.Errorf("FieldErrors gave %+v, not part of the message", fe)
				}
			}
		})
	}
}

func TestChain(t *testing.T) {
	tests := map[string]struct {
		specs   []config.HandlerSpec
		in      *Record
		want    []string
		wantErr string
		skip    bool
	}{
		"empty chain passes through": {
			in: &Record{Topic: "a"}, want: []string{"a"},
		},
		"filter then fan-out": {
			specs: []config.HandlerSpec{
				{CEL: &config.CELHandler{Filter: "record.topic != 'drop'"}},
				{Name: "test-fan-out", Args: map[string]string{"copies": "2"}},
			},
			in: &Record{Topic: "a"}, want: []string{"a.0", "a.1"},
		},
		"filtered before fan-out": {
			specs: []config.HandlerSpec{
				{CEL: &config.CELHandler{Filter: "record.topic != 'drop'"}},
				{Name: "test-fan-out", Args: map[string]string{"copies": "2"}},
			},
			in: &Record{Topic: "drop"}, want: []string{},
		},
		"fan-out, then each copy filtered and transformed": {
			specs: []config.HandlerSpec{
				{Name: "test-fan-out", Args: map[string]string{"copies": "3"}},
				{CEL: &config.CELHandler{Filter: "!record.topic.endsWith('.1')", Transform: &config.CELTransform{Topic: "record.topic + '-x'"}}},
			},
			in: &Record{Topic: "a"}, want: []string{"a.0-x", "a.2-x"},
		},
		"fan-out twice: 1->4": {
			specs: []config.HandlerSpec{
				{Name: "test-fan-out", Args: map[string]string{"copies": "2"}},
				{Name: "test-fan-out", Args: map[string]string{"copies": "2"}},
			},
			in: &Record{Topic: "a"}, want: []string{"a.0.0", "a.0.1", "a.1.0", "a.1.1"},
		},
		"a step error stops the chain and names the step": {
			specs:   []config.HandlerSpec{{Name: "identity"}, {Name: "test-failing"}},
			in:      &Record{Topic: "a", Partition: 1, Offset: 7},
			wantErr: "while running handlers[1] on a/1@7: boom",
		},
		"a skip in one fan-out branch skips the whole source record": {
			specs: []config.HandlerSpec{
				{Name: "test-fan-out", Args: map[string]string{"copies": "2"}},
				{CEL: &config.CELHandler{Filter: "record.topic == 'a.0' || json(record.value).ok", OnError: config.OnErrorSkip}},
			},
			in:      &Record{Topic: "a", Value: []byte("x")},
			wantErr: "record skipped by handlers[1] (onError: skip): handlers[1].cel.filter: json: invalid character 'x' looking for beginning of value",
			skip:    true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h, err := NewChain(tc.specs)
			if err != nil {
				t.Fatalf("NewChain: %v", err)
			}
			// out already holds a record from an earlier call: the chain must append.
			prior := &Record{Topic: "prior"}
			out, err := h.Handle(context.Background(), tc.in, []*Record{prior})
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr || IsSkip(err) != tc.skip {
					t.Fatalf("error = %v (skip %v), want %q (skip %v)", err, IsSkip(err), tc.wantErr, tc.skip)
				}
				if len(out) != 1 || out[0] != prior {
					t.Fatalf("on error the chain emitted %q, want only the prior record", topics(out))
				}
				return
			}
			if err != nil {
				t.Fatalf("Handle: %v", err)
			}
			if out[0] != prior {
				t.Fatal("the chain overwrote out instead of appending")
			}
			if got := topics(out[1:]); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("emitted %q, want %q", got, tc.want)
			}
		})
	}
}

// The chain is shared by every stream: run it from many goroutines (with -race).
func TestChainConcurrent(t *testing.T) {
	h, err := NewChain([]config.HandlerSpec{
		{CEL: &config.CELHandler{Filter: "!('skip' in record.headers)"}},
		{Name: "test-fan-out", Args: map[string]string{"copies": "2"}},
		{CEL: &config.CELHandler{Transform: &config.CELTransform{Key: "record.topic"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 8)
	for g := 0; g < 8; g++ {
		go func(g int) {
			var out []*Record
			for i := 0; i < 2000; i++ {
				r := &Record{Topic: fmt.Sprintf("t%d", g), Offset: int64(i)}
				if i%2 == 0 {
					r.Headers = []Header{{Key: "skip"}}
				}
				var err error
				out, err = h.Handle(context.Background(), r, out[:0])
				want := 2
				if i%2 == 0 {
					want = 0
				}
				if err != nil || len(out) != want {
					errs <- fmt.Errorf("goroutine %d record %d: %d outputs, err %v", g, i, len(out), err)
					return
				}
				for j, o := range out {
					if w := fmt.Sprintf("t%d.%d", g, j); string(o.Key) != w {
						errs <- fmt.Errorf("goroutine %d record %d: key %q, want %q", g, i, o.Key, w)
						return
					}
				}
			}
			errs <- nil
		}(g)
	}
	for g := 0; g < 8; g++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func TestRegisterPanicsOnlyOnProgrammerError(t *testing.T) {
	for name, reg := range map[string]func(){
		"duplicate handler":  func() { Register("identity", newIdentity) },
		"empty handler name": func() { Register(" ", newIdentity) },
		"duplicate listener": func() { RegisterListener("log", newLogListener) },
	} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("no panic")
				}
			}()
			reg()
		})
	}
}

func TestCheckArgs(t *testing.T) {
	tests := map[string]struct {
		args     map[string]string
		required []string
		optional []string
		want     string
	}{
		"ok":                 {args: map[string]string{"a": "1", "b": "2"}, required: []string{"a"}, optional: []string{"b"}},
		"missing":            {args: map[string]string{"b": "2"}, required: []string{"a"}, optional: []string{"b"}, want: "a: required"},
		"blank is missing":   {args: map[string]string{"a": " "}, required: []string{"a"}, want: "a: required"},
		"unknown, sorted":    {args: map[string]string{"a": "1", "z": "1", "c": "1"}, required: []string{"a"}, want: "c: unknown argument (accepted: a)"},
		"nothing accepted":   {args: map[string]string{"x": "1"}, want: "x: unknown argument (accepted: none)"},
		"nil args, optional": {optional: []string{"b"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := CheckArgs(tc.args, tc.required, tc.optional)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Fatalf("CheckArgs = %q, want %q", got, tc.want)
			}
		})
	}
}
