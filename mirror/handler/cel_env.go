package handler

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/ext"
	"github.com/google/cel-go/interpreter"
)

// The CEL environment is built once per process: building it type-checks the whole
// standard library and takes milliseconds, while it is safe to share.
var (
	celEnvOnce sync.Once
	celEnv     *cel.Env
	celEnvErr  error
)

func sharedCELEnv() (*cel.Env, error) {
	celEnvOnce.Do(func() {
		reg, err := types.NewRegistry()
		if err != nil {
			celEnvErr = fmt.Errorf("while building the CEL type registry: %w", err)
			return
		}
		rt := &recordTypes{Registry: reg}
		celEnv, err = cel.NewEnv(
			cel.CustomTypeAdapter(rt),
			cel.CustomTypeProvider(rt),
			cel.Variable("record", recordType),
			cel.Function("json",
				cel.Overload("json_bytes", []*cel.Type{cel.BytesType}, cel.DynType,
					cel.UnaryBinding(func(v ref.Val) ref.Val { return parseJSON([]byte(v.(types.Bytes))) })),
				cel.Overload("json_string", []*cel.Type{cel.StringType}, cel.DynType,
					cel.UnaryBinding(func(v ref.Val) ref.Val { return parseJSON([]byte(v.(types.String))) })),
			),
			cel.Function("toJSON",
				cel.Overload("to_json_dyn", []*cel.Type{cel.DynType}, cel.BytesType,
					cel.UnaryBinding(toJSON)),
			),
			ext.Strings(),
			ext.Encoders(),
			ext.Bindings(),
			ext.Math(),
			cel.CrossTypeNumericComparisons(true),
			cel.DefaultUTCTimeZone(true),
			// Not cel.ExtendedValidations: it forbids mixed-type literals, and a header
			// map such as {'a': b'1', 'b': 'text'} or a null header value needs them.
			cel.ASTValidators(
				cel.ValidateDurationLiterals(),
				cel.ValidateTimestampLiterals(),
				cel.ValidateRegexLiterals(),
			),
		)
		if err != nil {
			celEnvErr = fmt.Errorf("while building the CEL environment: %w", err)
		}
	})
	return celEnv, celEnvErr
}

// byteSizeCost makes json() and toJSON() cost like CEL's own string functions: one unit
// per ten bytes, so the cost limit also bounds them.
func byteSizeCost(args []ref.Val, result ref.Val) *uint64 {
	n := byteLen(result)
	for _, v := range args {
		n += byteLen(v)
	}
	c := uint64(1 + n/10)
	return &c
}

func byteLen(v ref.Val) int {
	switch b := v.(type) {
	case types.Bytes:
		return len(b)
	case types.String:
		return len(b)
	}
	return 0
}

var celCostTrackers = []interpreter.CostTrackerOption{
	interpreter.OverloadCostTracker("json_bytes", byteSizeCost),
	interpreter.OverloadCostTracker("json_string", byteSizeCost),
	interpreter.OverloadCostTracker("to_json_dyn", byteSizeCost),
}

// parseJSON turns a JSON document into CEL values: objects become map(string, dyn),
// arrays lists, integral numbers int (exact up to 64 bits), other numbers double.
// Well-formed documents take the fast path; the rest get encoding/json's verdict and
// error message.
func parseJSON(b []byte) ref.Val {
	v, ok := fastJSON(b)
	if !ok {
		var err error
		if v, err = slowJSON(b); err != nil {
			return types.NewErr("json: %v", err)
		}
	}
	return types.DefaultTypeAdapter.NativeToValue(v)
}

// slowJSON parses with encoding/json, keeping integers exact, and rejects anything but
// white space after the document.
func slowJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if rest := bytes.TrimLeft(b[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return nil, errors.New("unexpected data after the JSON value")
	}
	return numbersToCEL(v), nil
}

// numbersToCEL rewrites json.Number in place, so that 42 is an int and 4.2 a double.
func numbersToCEL(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = numbersToCEL(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbersToCEL(e)
		}
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i
		}
		f, _ := x.Float64()
		return f
	}
	return v
}

// toJSON renders a CEL value as compact JSON with sorted object keys. Bytes become
// base64 strings, timestamps RFC 3339 strings, durations Go duration strings.
func toJSON(v ref.Val) ref.Val {
	native, err := celToJSONValue(v)
	if err != nil {
		return types.NewErr("toJSON: %v", err)
	}
	out, err := json.Marshal(native)
	if err != nil {
		return types.NewErr("toJSON: %v", err)
	}
	return types.Bytes(out)
}

func celToJSONValue(v ref.Val) (any, error) {
	switch x := v.(type) {
	case types.Null:
		return nil, nil
	case types.Bool:
		return bool(x), nil
	case types.Int:
		return int64(x), nil
	case types.Uint:
		return uint64(x), nil
	case types.Double:
		return float64(x), nil
	case types.String:
		return string(x), nil
	case types.Bytes:
		return base64.StdEncoding.EncodeToString(x), nil
	case types.Timestamp:
		return x.Time.UTC().Format(time.RFC3339Nano), nil
	case types.Duration:
		return x.Duration.String(), nil
	case *types.Err:
		return nil, x
	case traits.Mapper:
		out := map[string]any{}
		for it := x.Iterator(); it.HasNext() == types.True; {
			k := it.Next()
			ks, ok := k.(types.String)
			if !ok {
				return nil, fmt.Errorf("a JSON object key must be a string, not %s", k.Type().TypeName())
			}
			e, err := celToJSONValue(x.Get(k))
			if err != nil {
				return nil, err
			}
			out[string(ks)] = e
		}
		return out, nil
	case traits.Lister:
		n := int(x.Size().(types.Int))
		out := make([]any, n)
		for i := 0; i < n; i++ {
			e, err := celToJSONValue(x.Get(types.Int(i)))
			if err != nil {
				return nil, err
			}
			out[i] = e
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s has no JSON form", v.Type().TypeName())
}

// compileError formats CEL issues without CEL's "ERROR: <input>:" prefix: the field
// path already says which expression it is. Position and caret snippet are kept.
func compileError(iss *cel.Issues) string {
	return strings.ReplaceAll(strings.TrimSpace(iss.Err().Error()), "ERROR: <input>:", "")
}

// sortedKeys returns a CEL map's keys in order, so header maps produce headers in a
// stable order.
func sortedKeys(m traits.Mapper) []ref.Val {
	var keys []ref.Val
	for it := m.Iterator(); it.HasNext() == types.True; {
		keys = append(keys, it.Next())
	}
	sort.Slice(keys, func(i, j int) bool {
		return fmt.Sprint(keys[i].Value()) < fmt.Sprint(keys[j].Value())
	})
	return keys
}
