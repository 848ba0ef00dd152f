package handler

import (
	"errors"
	"fmt"
	"sort"
	"strings"
)

// FieldError is one problem with a handler or listener spec, at its field path, for
// example `handlers[1].args.pattern: error parsing regexp: missing closing ): ...`.
// NewChain and NewListener return every problem at once, joined with errors.Join; use
// FieldErrors to list them.
type FieldError struct {
	// Field is the path of the offending field, such as handlers[2].cel.filter.
	Field string
	// Detail says what is wrong.
	Detail string
	// Unregistered is set when the problem is only that a named handler or listener is
	// not registered in this binary. A custom engine image (one whose main registers its
	// own handlers) may know the name, so the operator lets such specs through when the
	// mirror runs a custom image; the engine checks them again when it starts.
	Unregistered bool
}

// Error returns "field: detail".
func (e *FieldError) Error() string { return e.Field + ": " + e.Detail }

// FieldErrors lists the *FieldError values in an error returned by NewChain or
// NewListener, in the order they were found. Other errors are returned as a FieldError
// without a field.
func FieldErrors(err error) []*FieldError {
	if err == nil {
		return nil
	}
	var fe *FieldError
	if errors.As(err, &fe) && fe == err {
		return []*FieldError{fe}
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []*FieldError
		for _, e := range j.Unwrap() {
			out = append(out, FieldErrors(e)...)
		}
		return out
	}
	if errors.As(err, &fe) {
		return []*FieldError{fe}
	}
	return []*FieldError{{Detail: err.Error()}}
}

// ArgError is what a handler or listener factory returns for one bad argument, so the
// error names the argument's field path (handlers[1].args.pattern). Any other factory
// error is reported at handlers[i].args.
type ArgError struct {
	// Arg is the argument's name; empty for a problem with the args as a whole.
	Arg string
	// Detail says what is wrong.
	Detail string
}

// Error returns "arg: detail".
func (e *ArgError) Error() string {
	if e.Arg == "" {
		return e.Detail
	}
	return e.Arg + ": " + e.Detail
}

// CheckArgs returns an *ArgError for the first missing required argument or the first
// (in sorted order) argument that is neither required nor optional. Factories call it
// first so that a misspelt argument is an error rather than silently ignored.
func CheckArgs(args map[string]string, required, optional []string) error {
	for _, r := range required {
		if strings.TrimSpace(args[r]) == "" {
			return &ArgError{Arg: r, Detail: "required"}
		}
	}
	accepted := append(append([]string(nil), required...), optional...)
	sort.Strings(accepted)
	names := make([]string, 0, len(args))
	for k := range args {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if !contains(accepted, k) {
			list := strings.Join(accepted, ", ")
			if list == "" {
				list = "none"
			}
			return &ArgError{Arg: k, Detail: fmt.Sprintf("unknown argument (accepted: %s)", list)}
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// SkipError is returned by a handler (and by the chain) when a record was dropped
// because its evaluation failed under `onError: skip`. The engine treats the record as
// done (its offset may be committed) and counts it as skipped, not as filtered.
type SkipError struct {
	// Step is the field path of the handler that failed, such as handlers[0].
	Step string
	// Err is the evaluation error.
	Err error
}

// Error describes the skipped record's failure.
func (e *SkipError) Error() string {
	return fmt.Sprintf("record skipped by %s (onError: skip): %v", e.Step, e.Err)
}

// Unwrap returns the evaluation error.
func (e *SkipError) Unwrap() error { return e.Err }

// IsSkip reports whether err says the record was skipped under `onError: skip` rather
// than failed. Any other handler error must stop the engine without committing past the
// record.
func IsSkip(err error) bool {
	var s *SkipError
	return errors.As(err, &s)
}
