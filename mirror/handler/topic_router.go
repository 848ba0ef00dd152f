package handler

import (
	"context"
	"fmt"
	"regexp"
	"strings"
)

// topicRouter sends records whose topic, key or header matches a regular expression to
// another target topic (before topics.rename is applied). Records that do not match
// pass unchanged.
//
// Args:
//
//	pattern: an RE2 regular expression that must match the WHOLE input (required), as
//	         topics.include does.
//	on:      what is matched: topic (default), key, or header:NAME (the last header
//	         named NAME; a record without it does not match). A null key does not match.
//	topic:   the target topic (required). It may use the pattern's groups, $1 or ${name},
//	         as in Go's regexp.Expand; the result must be a valid Kafka topic name or
//	         the record fails.
//
// Example: `{pattern: "orders\\.(eu|us)", topic: "orders-$1"}` routes orders.eu to
// orders-eu; `{on: "header:region", pattern: "eu-.*", topic: "orders-eu"}` routes by a
// header.
type topicRouter struct {
	re       *regexp.Regexp
	on       string // "topic", "key" or "header"
	header   string
	template string
	expands  bool
}

func newTopicRouter(args map[string]string) (Handler, error) {
	if err := CheckArgs(args, []string{"pattern", "topic"}, []string{"on"}); err != nil {
		return nil, err
	}
	re, err := regexp.Compile(`^(?:` + args["pattern"] + `)$`)
	if err != nil {
		// Compile the pattern alone so the message points into what the user wrote.
		if _, err2 := regexp.Compile(args["pattern"]); err2 != nil {
			err = err2
		}
		return nil, &ArgError{Arg: "pattern", Detail: err.Error()}
	}
	r := &topicRouter{re: re, on: "topic", template: args["topic"], expands: strings.Contains(args["topic"], "$")}
	switch on := args["on"]; {
	case on == "" || on == "topic":
	case on == "key":
		r.on = "key"
	case strings.HasPrefix(on, "header:") && len(on) > len("header:"):
		r.on, r.header = "header", strings.TrimPrefix(on, "header:")
	default:
		return nil, &ArgError{Arg: "on", Detail: fmt.Sprintf("%q is not topic, key or header:NAME", on)}
	}
	if !r.expands && !validTopicName(r.template) {
		return nil, &ArgError{Arg: "topic", Detail: fmt.Sprintf("%q is not a valid Kafka topic name (letters, digits, '.', '_', '-'; at most 249)", r.template)}
	}
	return r, nil
}

func (r *topicRouter) Handle(_ context.Context, in *Record, out []*Record) ([]*Record, error) {
	var subject []byte
	switch r.on {
	case "topic":
		if !r.expands {
			if r.re.MatchString(in.Topic) {
				in.Topic = r.template
			}
			return append(out, in), nil
		}
		subject = []byte(in.Topic)
	case "key":
		if in.Key == nil {
			return append(out, in), nil
		}
		subject = in.Key
	case "header":
		found := false
		for i := len(in.Headers) - 1; i >= 0; i-- {
			if in.Headers[i].Key == r.header {
				subject, found = in.Headers[i].Value, true
				break
			}
		}
		if !found {
			return append(out, in), nil
		}
	}
	m := r.re.FindSubmatchIndex(subject)
	if m == nil {
		return append(out, in), nil
	}
	topic := r.template
	if r.expands {
		topic = string(r.re.Expand(nil, []byte(r.template), subject, m))
		if !validTopicName(topic) {
			return out, fmt.Errorf("topic-router made %q from %q, which is not a valid Kafka topic name", topic, r.template)
		}
	}
	in.Topic = topic
	return append(out, in), nil
}

// validTopicName applies Kafka's topic name rules.
func validTopicName(s string) bool {
	if s == "" || len(s) > 249 || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
