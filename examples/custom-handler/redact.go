package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/handler"
)

// emailAddress matches what a person would call an email address in free text.
var emailAddress = regexp.MustCompile(`[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}`)

// defaultReplacement is what an address becomes when the args name no replacement.
const defaultReplacement = "[redacted]"

// emailRedactor replaces every email address in a JSON record value. Values that are
// not JSON pass unchanged. Args:
//
//	replacement: optional, default "[redacted]"; it must not contain "@", a quote or a
//	             backslash, so that the value stays valid JSON and holds no address.
//
// It rewrites the value's text in place rather than decoding and re-encoding it, so the
// key order, numbers and spacing of the JSON stay exactly as the producer wrote them.
type emailRedactor struct {
	replacement []byte
}

func newEmailRedactor(args map[string]string) (handler.Handler, error) {
	if err := handler.CheckArgs(args, nil, []string{"replacement"}); err != nil {
		return nil, err
	}
	r := &emailRedactor{replacement: []byte(defaultReplacement)}
	if v, ok := args["replacement"]; ok {
		if strings.ContainsAny(v, `@"\`) {
			return nil, &handler.ArgError{Arg: "replacement", Detail: `must not contain "@", a quote or a backslash: the value must stay valid JSON without an address`}
		}
		r.replacement = []byte(v)
	}
	return r, nil
}

// Handle emits the record with its addresses replaced; a record without one is emitted
// as it is, without a copy.
func (r *emailRedactor) Handle(_ context.Context, in *handler.Record, out []*handler.Record) ([]*handler.Record, error) {
	if in.Value != nil && emailAddress.Match(in.Value) && json.Valid(in.Value) {
		in.Value = emailAddress.ReplaceAllLiteral(in.Value, r.replacement)
	}
	return append(out, in), nil
}
