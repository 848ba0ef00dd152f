package handler

import (
	"fmt"
	"reflect"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
	"github.com/google/cel-go/interpreter"
)

// This file is the CEL view of a Record: the `record` variable, its fields and the
// map view of its headers. It is built lazily and without copies: the activation IS the
// record (a pointer conversion), each field is read only when an expression selects
// it, and `record.headers` scans the header slice instead of building a map.

// recordTypeName is the CEL type of `record`.
const recordTypeName = "kafkamirror.Record"

var (
	recordType     = types.NewObjectType(recordTypeName)
	headersMapType = types.NewMapType(types.StringType, types.BytesType)
	headerPairType = types.NewMapType(types.StringType, types.DynType)
	recordPtrType  = reflect.TypeOf(&Record{})
)

// recordFields declares the fields of `record`: their CEL types, presence tests
// (`has(record.key)` is false for a null key) and getters.
var recordFields = map[string]*types.FieldType{
	"topic": {
		Type:    types.StringType,
		IsSet:   func(any) bool { return true },
		GetFrom: func(t any) (any, error) { return types.String(t.(*Record).Topic), nil },
	},
	"partition": {
		Type:    types.IntType,
		IsSet:   func(any) bool { return true },
		GetFrom: func(t any) (any, error) { return types.Int(t.(*Record).Partition), nil },
	},
	"offset": {
		Type:    types.IntType,
		IsSet:   func(any) bool { return true },
		GetFrom: func(t any) (any, error) { return types.Int(t.(*Record).Offset), nil },
	},
	"timestamp": {
		Type:    types.TimestampType,
		IsSet:   func(t any) bool { return !t.(*Record).Timestamp.IsZero() },
		GetFrom: func(t any) (any, error) { return types.Timestamp{Time: t.(*Record).Timestamp}, nil },
	},
	"key": {
		Type:    types.BytesType,
		IsSet:   func(t any) bool { return t.(*Record).Key != nil },
		GetFrom: func(t any) (any, error) { return types.Bytes(t.(*Record).Key), nil },
	},
	"value": {
		Type:    types.BytesType,
		IsSet:   func(t any) bool { return t.(*Record).Value != nil },
		GetFrom: func(t any) (any, error) { return types.Bytes(t.(*Record).Value), nil },
	},
	"headers": {
		Type:    headersMapType,
		IsSet:   func(t any) bool { return len(t.(*Record).Headers) > 0 },
		GetFrom: func(t any) (any, error) { return headerMap{t.(*Record)}, nil },
	},
	"headerList": {
		Type:    types.NewListType(headerPairType),
		IsSet:   func(t any) bool { return len(t.(*Record).Headers) > 0 },
		GetFrom: func(t any) (any, error) { return headerList(t.(*Record)), nil },
	},
}

var recordFieldNames = func() []string {
	names := make([]string, 0, len(recordFields))
	for n := range recordFields {
		names = append(names, n)
	}
	return names
}()

// recordTypes adds the record type to CEL's standard type registry. It is both the
// environment's type provider and its adapter, so a *Record that flows through `dyn`
// still selects fields.
type recordTypes struct {
	*types.Registry
}

func (p *recordTypes) FindStructType(name string) (*types.Type, bool) {
	if name == recordTypeName {
		return types.NewTypeTypeWithParam(recordType), true
	}
	return p.Registry.FindStructType(name)
}

func (p *recordTypes) FindStructFieldNames(name string) ([]string, bool) {
	if name == recordTypeName {
		return recordFieldNames, true
	}
	return p.Registry.FindStructFieldNames(name)
}

func (p *recordTypes) FindStructFieldType(name, field string) (*types.FieldType, bool) {
	if name == recordTypeName {
		f, ok := recordFields[field]
		return f, ok
	}
	return p.Registry.FindStructFieldType(name, field)
}

func (p *recordTypes) NewValue(name string, fields map[string]ref.Val) ref.Val {
	if name == recordTypeName {
		return types.NewErr("a %s cannot be constructed in an expression", recordTypeName)
	}
	return p.Registry.NewValue(name, fields)
}

func (p *recordTypes) NativeToValue(v any) ref.Val {
	if r, ok := v.(*Record); ok {
		return recordObject{r}
	}
	return p.Registry.NativeToValue(v)
}

// recordActivation resolves `record` to the record itself: converting a *Record to a
// *recordActivation costs nothing, so an evaluation allocates no activation.
type recordActivation Record

func (a *recordActivation) ResolveName(name string) (any, bool) {
	if name == "record" {
		return (*Record)(a), true
	}
	return nil, false
}

func (a *recordActivation) Parent() interpreter.Activation { return nil }

// recordObject is `record` as a CEL value, for the rare expression that passes it
// around as dyn. A one-pointer struct is stored in an interface without allocating.
type recordObject struct{ r *Record }

func (o recordObject) ConvertToNative(t reflect.Type) (any, error) {
	if t == recordPtrType {
		return o.r, nil
	}
	return nil, fmt.Errorf("a record cannot be converted to %v", t)
}

func (o recordObject) ConvertToType(t ref.Type) ref.Val {
	if t == types.TypeType {
		return recordType
	}
	if t.TypeName() == recordTypeName {
		return o
	}
	return types.NewErr("type conversion error from %s to '%s'", recordTypeName, t)
}

func (o recordObject) Equal(other ref.Val) ref.Val {
	p, ok := other.(recordObject)
	return types.Bool(ok && p.r == o.r)
}

func (o recordObject) Type() ref.Type { return recordType }
func (o recordObject) Value() any     { return o.r }

func (o recordObject) Get(index ref.Val) ref.Val {
	name, ok := index.(types.String)
	if !ok {
		return types.ValOrErr(index, "no such overload")
	}
	f, ok := recordFields[string(name)]
	if !ok {
		return types.NewErr("no such field '%s'", name)
	}
	v, _ := f.GetFrom(o.r)
	return v.(ref.Val)
}

func (o recordObject) IsSet(index ref.Val) ref.Val {
	name, ok := index.(types.String)
	if !ok {
		return types.ValOrErr(index, "no such overload")
	}
	f, ok := recordFields[string(name)]
	if !ok {
		return types.NewErr("no such field '%s'", name)
	}
	return types.Bool(f.IsSet(o.r))
}

// headerMap is `record.headers`: a map(string, bytes) view of the header slice. When a
// key repeats, the last header wins, as for most Kafka clients' "last header" lookup;
// record.headerList keeps every header. Lookups scan the (short) slice and copy nothing.
type headerMap struct{ r *Record }

var _ traits.Mapper = headerMap{}

// last returns the index of the last header named key, or -1.
func (m headerMap) last(key string) int {
	for i := len(m.r.Headers) - 1; i >= 0; i-- {
		if m.r.Headers[i].Key == key {
			return i
		}
	}
	return -1
}

// firstOccurrence reports whether header i is the first one with its key, so iteration
// visits each key once.
func (m headerMap) firstOccurrence(i int) bool {
	for j := 0; j < i; j++ {
		if m.r.Headers[j].Key == m.r.Headers[i].Key {
			return false
		}
	}
	return true
}

func (m headerMap) Find(key ref.Val) (ref.Val, bool) {
	k, ok := key.(types.String)
	if !ok {
		return types.ValOrErr(key, "no such key: %v", key), false
	}
	if i := m.last(string(k)); i >= 0 {
		return types.Bytes(m.r.Headers[i].Value), true
	}
	return nil, false
}

func (m headerMap) Contains(key ref.Val) ref.Val {
	v, found := m.Find(key)
	if !found && v != nil {
		return v
	}
	return types.Bool(found)
}

func (m headerMap) Get(key ref.Val) ref.Val {
	v, found := m.Find(key)
	if !found {
		if v != nil {
			return v
		}
		return types.NewErr("no such key: %v", key)
	}
	return v
}

func (m headerMap) Size() ref.Val {
	n := 0
	for i := range m.r.Headers {
		if m.firstOccurrence(i) {
			n++
		}
	}
	return types.Int(n)
}

func (m headerMap) Iterator() traits.Iterator { return &headerKeyIterator{m: m} }

func (m headerMap) toNative() map[string][]byte {
	out := make(map[string][]byte, len(m.r.Headers))
	for _, h := range m.r.Headers {
		out[h.Key] = h.Value
	}
	return out
}

func (m headerMap) ConvertToNative(t reflect.Type) (any, error) {
	switch t {
	case reflect.TypeOf(map[string][]byte(nil)):
		return m.toNative(), nil
	case reflect.TypeOf(map[string]string(nil)):
		out := make(map[string]string, len(m.r.Headers))
		for _, h := range m.r.Headers {
			out[h.Key] = string(h.Value)
		}
		return out, nil
	}
	return types.NewStringInterfaceMap(types.DefaultTypeAdapter, m.toAny()).ConvertToNative(t)
}

func (m headerMap) toAny() map[string]any {
	out := make(map[string]any, len(m.r.Headers))
	for _, h := range m.r.Headers {
		out[h.Key] = h.Value
	}
	return out
}

func (m headerMap) ConvertToType(t ref.Type) ref.Val {
	switch t.TypeName() {
	case types.MapType.TypeName():
		return m
	case types.TypeType.TypeName():
		return types.MapType
	}
	return types.NewErr("type conversion error from map to '%s'", t)
}

func (m headerMap) Equal(other ref.Val) ref.Val {
	o, ok := other.(traits.Mapper)
	if !ok {
		return types.False
	}
	if m.Size() != o.Size() {
		return types.False
	}
	for i := range m.r.Headers {
		if !m.firstOccurrence(i) {
			continue
		}
		k := types.String(m.r.Headers[i].Key)
		ov, found := o.Find(k)
		if !found {
			return types.False
		}
		if mv, _ := m.Find(k); mv.Equal(ov) != types.True {
			return types.False
		}
	}
	return types.True
}

func (m headerMap) Type() ref.Type { return types.MapType }
func (m headerMap) Value() any     { return m.toNative() }

// headerKeyIterator visits each distinct header key once, in first-seen order.
type headerKeyIterator struct {
	m headerMap
	i int
}

func (it *headerKeyIterator) skip() {
	for it.i < len(it.m.r.Headers) && !it.m.firstOccurrence(it.i) {
		it.i++
	}
}

func (it *headerKeyIterator) HasNext() ref.Val {
	it.skip()
	return types.Bool(it.i < len(it.m.r.Headers))
}

func (it *headerKeyIterator) Next() ref.Val {
	it.skip()
	if it.i >= len(it.m.r.Headers) {
		return nil
	}
	k := types.String(it.m.r.Headers[it.i].Key)
	it.i++
	return k
}

func (it *headerKeyIterator) ConvertToNative(reflect.Type) (any, error) {
	return nil, fmt.Errorf("an iterator cannot be converted")
}
func (it *headerKeyIterator) ConvertToType(ref.Type) ref.Val {
	return types.NewErr("an iterator cannot be converted")
}
func (it *headerKeyIterator) Equal(ref.Val) ref.Val { return types.False }
func (it *headerKeyIterator) Type() ref.Type        { return types.IteratorType }
func (it *headerKeyIterator) Value() any            { return nil }

// headerList is `record.headerList`: every header in order, duplicates kept, each as
// {"key": string, "value": bytes or null}. It is built only when referenced.
func headerList(r *Record) ref.Val {
	elems := make([]ref.Val, len(r.Headers))
	for i, h := range r.Headers {
		var v ref.Val = types.NullValue
		if h.Value != nil {
			v = types.Bytes(h.Value)
		}
		elems[i] = types.NewRefValMap(types.DefaultTypeAdapter, map[ref.Val]ref.Val{
			types.String("key"):   types.String(h.Key),
			types.String("value"): v,
		})
	}
	return types.NewRefValList(types.DefaultTypeAdapter, elems)
}
