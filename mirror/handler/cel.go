package handler

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/cel-go/cel"
	celast "github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// interruptCheckFrequency is how many comprehension iterations run between two checks
// of the per-record deadline.
const interruptCheckFrequency = 100

// celHandler is one `cel:` step: an optional filter, then optional transforms, all
// compiled and type-checked once when the chain is built.
type celHandler struct {
	path      string
	filter    *celProgram
	transform []*celProgram // the transforms present, in the order key, value, headers, topic, partition
	// needsDeadline is true when some expression has a comprehension: only loops can
	// run long enough for a deadline to matter, and only they check it.
	needsDeadline bool
	timeout       time.Duration
	skip          bool
	skipLog       *skipLogger
}

// celProgram is one compiled expression and the record part it produces.
type celProgram struct {
	field string // the config field path, e.g. handlers[0].cel.transform.value
	part  string // filter, key, value, headers, topic or partition
	// tracked enforces the cost limit at run time. untracked, set when the static
	// worst case is under the limit, is used for records within the estimate's bounds.
	tracked, untracked cel.Program
}

// Allowed result kinds of each expression, checked at compile time (dyn is checked at
// run time).
var allowedKinds = map[string][]types.Kind{
	"filter":    {types.BoolKind},
	"key":       {types.BytesKind, types.StringKind, types.NullTypeKind},
	"value":     {types.BytesKind, types.StringKind, types.NullTypeKind},
	"headers":   {types.MapKind, types.ListKind},
	"topic":     {types.StringKind},
	"partition": {types.IntKind, types.UintKind},
}

var kindNames = map[string]string{
	"filter":    "bool",
	"key":       "bytes, string or null",
	"value":     "bytes, string or null",
	"headers":   "a map(string, bytes|string|null) or a list of [key, value] pairs or {key, value} maps",
	"topic":     "string",
	"partition": "int",
}

func newCELHandler(spec *config.CELHandler, path string, o *options) (Handler, error) {
	env, err := sharedCELEnv()
	if err != nil {
		return nil, &FieldError{Field: path + ".cel", Detail: err.Error()}
	}
	h := &celHandler{path: path, timeout: o.evalTimeout}
	switch spec.OnError {
	case "", config.OnErrorFail:
	case config.OnErrorSkip:
		h.skip = true
		h.skipLog = &skipLogger{log: o.log, path: path, interval: o.skipLogInterval}
	default:
		return nil, &FieldError{Field: path + ".cel.onError", Detail: fmt.Sprintf("%q is not fail or skip", spec.OnError)}
	}
	t := spec.Transform
	if t == nil {
		t = &config.CELTransform{}
	}
	if spec.Filter == "" && *t == (config.CELTransform{}) {
		return nil, &FieldError{Field: path + ".cel", Detail: "set filter and/or transform"}
	}
	var errs []error
	compile := func(field, part, expr string) *celProgram {
		if expr == "" {
			return nil
		}
		p, loops, err := compileCEL(env, field, part, expr, o.costLimit)
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		h.needsDeadline = h.needsDeadline || loops
		return p
	}
	h.filter = compile(path+".cel.filter", "filter", spec.Filter)
	tp := path + ".cel.transform."
	for _, e := range []struct{ part, expr string }{
		{"key", t.Key}, {"value", t.Value}, {"headers", t.Headers}, {"topic", t.Topic}, {"partition", t.Partition},
	} {
		if p := compile(tp+e.part, e.part, e.expr); p != nil {
			h.transform = append(h.transform, p)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return h, nil
}

// compileCEL parses, type-checks and plans one expression, and reports whether it has a
// comprehension (a loop).
func compileCEL(env *cel.Env, field, part, expr string, costLimit uint64) (*celProgram, bool, error) {
	ast, iss := env.Compile(expr)
	if iss.Err() != nil {
		return nil, false, &FieldError{Field: field, Detail: compileError(iss)}
	}
	if out := ast.OutputType(); out.Kind() != types.DynKind && !kindAllowed(out.Kind(), allowedKinds[part]) {
		return nil, false, &FieldError{Field: field, Detail: fmt.Sprintf("must give %s, not %s", kindNames[part], out)}
	}
	loops := len(celast.MatchDescendants(celast.NavigateAST(ast.NativeRep()), celast.KindMatcher(celast.ComprehensionKind))) > 0
	opts := []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize)}
	if loops {
		opts = append(opts, cel.InterruptCheckFrequency(interruptCheckFrequency))
	}
	p := &celProgram{field: field, part: part}
	var err error
	p.tracked, err = env.Program(ast, append(opts, cel.CostLimit(costLimit), cel.CostTrackerOptions(celCostTrackers...))...)
	if err != nil {
		return nil, false, &FieldError{Field: field, Detail: err.Error()}
	}
	if est, err := env.EstimateCost(ast, recordSizes{}); err == nil && est.Max <= costLimit {
		if p.untracked, err = env.Program(ast, opts...); err != nil {
			return nil, false, &FieldError{Field: field, Detail: err.Error()}
		}
	}
	return p, loops, nil
}

func kindAllowed(k types.Kind, allowed []types.Kind) bool {
	for _, a := range allowed {
		if k == a {
			return true
		}
	}
	return false
}

// Handle filters, then transforms in place. Every transform sees the record as it came
// in (they are evaluated first and applied together), so their order does not matter.
func (h *celHandler) Handle(ctx context.Context, in *Record, out []*Record) ([]*Record, error) {
	evalCtx := ctx
	if h.needsDeadline && h.timeout > 0 {
		var cancel context.CancelFunc
		evalCtx, cancel = context.WithTimeout(ctx, h.timeout)
		defer cancel()
	}
	act := (*recordActivation)(in)
	small := withinEstimate(in)
	if h.filter != nil {
		v, err := h.filter.eval(evalCtx, h.needsDeadline, small, act)
		if err != nil {
			return out, h.fail(ctx, in, err)
		}
		keep, ok := v.(types.Bool)
		if !ok {
			return out, h.fail(ctx, in, fmt.Errorf("%s: gave %s, not bool", h.filter.field, v.Type().TypeName()))
		}
		if !keep {
			return out, nil
		}
	}
	if len(h.transform) == 0 {
		return append(out, in), nil
	}
	var results [5]ref.Val
	for i, p := range h.transform {
		v, err := p.eval(evalCtx, h.needsDeadline, small, act)
		if err != nil {
			return out, h.fail(ctx, in, err)
		}
		results[i] = v
	}
	// Convert everything before changing the record, so a failing transform leaves it whole.
	var next Record
	for i, p := range h.transform {
		if err := p.apply(results[i], &next); err != nil {
			return out, h.fail(ctx, in, err)
		}
	}
	for _, p := range h.transform {
		switch p.part {
		case "key":
			in.Key = next.Key
		case "value":
			in.Value = next.Value
		case "headers":
			in.Headers = next.Headers
		case "topic":
			in.Topic = next.Topic
		case "partition":
			in.Partition = next.Partition
		}
	}
	return append(out, in), nil
}

func (p *celProgram) eval(ctx context.Context, withContext, small bool, act *recordActivation) (ref.Val, error) {
	prg := p.tracked
	if small && p.untracked != nil {
		prg = p.untracked
	}
	var (
		v   ref.Val
		err error
	)
	if withContext {
		v, _, err = prg.ContextEval(ctx, act)
	} else {
		v, _, err = prg.Eval(act)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.field, err)
	}
	return v, nil
}

// apply converts a transform's result into its part of next.
func (p *celProgram) apply(v ref.Val, next *Record) error {
	var err error
	switch p.part {
	case "key":
		next.Key, err = toBytes(v)
	case "value":
		next.Value, err = toBytes(v)
	case "headers":
		next.Headers, err = toHeaders(v)
	case "topic":
		s, ok := v.(types.String)
		switch {
		case !ok:
			err = fmt.Errorf("gave %s, not string", v.Type().TypeName())
		case !validTopicName(string(s)):
			err = fmt.Errorf("gave %q, which is not a valid Kafka topic name", string(s))
		default:
			next.Topic = string(s)
		}
	case "partition":
		var n int64
		switch x := v.(type) {
		case types.Int:
			n = int64(x)
		case types.Uint:
			n = int64(min(uint64(x), math.MaxInt32+1))
		default:
			err = fmt.Errorf("gave %s, not int", v.Type().TypeName())
		}
		if err == nil && (n < 0 || n > math.MaxInt32) {
			err = fmt.Errorf("gave %d, which is not a partition number", n)
		}
		next.Partition = int32(n)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", p.field, err)
	}
	return nil
}

func toBytes(v ref.Val) ([]byte, error) {
	switch x := v.(type) {
	case types.Bytes:
		return []byte(x), nil
	case types.String:
		return []byte(x), nil
	case types.Null:
		return nil, nil
	}
	return nil, fmt.Errorf("gave %s, not bytes, string or null", v.Type().TypeName())
}

func headerValue(v ref.Val) ([]byte, error) {
	b, err := toBytes(v)
	if err != nil {
		return nil, fmt.Errorf("a header value %w", err)
	}
	return b, nil
}

// toHeaders accepts a map(string, bytes|string|null), whose headers come out sorted by
// key, or a list whose elements are [key, value] lists or {"key": k, "value": v} maps
// (the shape of record.headerList), which keeps order and duplicates.
func toHeaders(v ref.Val) ([]Header, error) {
	switch x := v.(type) {
	case traits.Mapper:
		keys := sortedKeys(x)
		hs := make([]Header, 0, len(keys))
		for _, k := range keys {
			ks, ok := k.(types.String)
			if !ok {
				return nil, fmt.Errorf("a header key must be a string, not %s", k.Type().TypeName())
			}
			b, err := headerValue(x.Get(k))
			if err != nil {
				return nil, fmt.Errorf("header %q: %w", string(ks), err)
			}
			hs = append(hs, Header{Key: string(ks), Value: b})
		}
		return hs, nil
	case traits.Lister:
		n := int(x.Size().(types.Int))
		hs := make([]Header, 0, n)
		for i := 0; i < n; i++ {
			h, err := toHeader(x.Get(types.Int(i)))
			if err != nil {
				return nil, fmt.Errorf("headers[%d]: %w", i, err)
			}
			hs = append(hs, h)
		}
		return hs, nil
	}
	return nil, fmt.Errorf("gave %s, not a map or a list", v.Type().TypeName())
}

func toHeader(e ref.Val) (Header, error) {
	var k, val ref.Val
	switch x := e.(type) {
	case traits.Mapper:
		if x.Size() != types.Int(2) {
			return Header{}, errors.New(`a header map must be {"key": k, "value": v}`)
		}
		var kf, vf bool
		k, kf = x.Find(types.String("key"))
		val, vf = x.Find(types.String("value"))
		if !kf || !vf {
			return Header{}, errors.New(`a header map must be {"key": k, "value": v}`)
		}
	case traits.Lister:
		if x.Size() != types.Int(2) {
			return Header{}, errors.New("a header pair must be [key, value]")
		}
		k, val = x.Get(types.Int(0)), x.Get(types.Int(1))
	default:
		return Header{}, fmt.Errorf("a header must be a [key, value] pair or a {key, value} map, not %s", e.Type().TypeName())
	}
	ks, ok := k.(types.String)
	if !ok {
		return Header{}, fmt.Errorf("a header key must be a string, not %s", k.Type().TypeName())
	}
	b, err := headerValue(val)
	if err != nil {
		return Header{}, fmt.Errorf("header %q: %w", string(ks), err)
	}
	return Header{Key: string(ks), Value: b}, nil
}

// fail applies the onError policy. A record is only skipped when the engine is still
// running: an evaluation cut short by shutdown must not count as done, or its offset
// would be committed without the record being mirrored.
func (h *celHandler) fail(ctx context.Context, in *Record, err error) error {
	if h.skip && ctx.Err() == nil {
		h.skipLog.skipped(in, err)
		return &SkipError{Step: h.path, Err: err}
	}
	return err
}

// skipLogger logs skipped records at most once per interval per step, with the count
// since the last line, so a bad expression on a busy topic does not flood the log.
type skipLogger struct {
	log      logr.Logger
	path     string
	interval time.Duration

	mu      sync.Mutex
	last    time.Time
	pending uint64
}

func (s *skipLogger) skipped(in *Record, err error) {
	s.mu.Lock()
	s.pending++
	now := time.Now()
	if !s.last.IsZero() && now.Sub(s.last) < s.interval {
		s.mu.Unlock()
		return
	}
	n := s.pending
	s.pending, s.last = 0, now
	s.mu.Unlock()
	s.log.Error(err, "Skipped records whose CEL evaluation failed (onError: skip)",
		"step", s.path, "skipped", n, "topic", in.Topic, "partition", in.Partition, "offset", in.Offset)
}
