package handler

import (
	"bytes"
	"context"
	"fmt"
)

// headerFilter keeps or drops records by the presence (or value) of one header.
//
// Args:
//
//	mode:   keep | drop (required). keep emits only matching records, drop emits only
//	        the others.
//	header: the header key (required, case-sensitive as in Kafka).
//	value:  optional; when given, a record matches only if one of its headers named
//	        `header` has exactly this value (as UTF-8 bytes). Without it, presence matches.
//
// Examples: `{mode: drop, header: skip}` drops every record carrying a "skip" header;
// `{mode: keep, header: region, value: eu}` keeps only records with header region=eu.
type headerFilter struct {
	keep     bool
	key      string
	value    []byte
	hasValue bool
}

func newHeaderFilter(args map[string]string) (Handler, error) {
	if err := CheckArgs(args, []string{"mode", "header"}, []string{"value"}); err != nil {
		return nil, err
	}
	f := &headerFilter{key: args["header"]}
	switch args["mode"] {
	case "keep":
		f.keep = true
	case "drop":
	default:
		return nil, &ArgError{Arg: "mode", Detail: fmt.Sprintf("%q is not keep or drop", args["mode"])}
	}
	if v, ok := args["value"]; ok {
		f.value, f.hasValue = []byte(v), true
	}
	return f, nil
}

func (f *headerFilter) Handle(_ context.Context, in *Record, out []*Record) ([]*Record, error) {
	if f.matches(in) == f.keep {
		out = append(out, in)
	}
	return out, nil
}

func (f *headerFilter) matches(r *Record) bool {
	for i := range r.Headers {
		if r.Headers[i].Key == f.key && (!f.hasValue || bytes.Equal(r.Headers[i].Value, f.value)) {
			return true
		}
	}
	return false
}
