package handler

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// NewChain builds the handler chain of a config's handlers list: each step runs on every
// record the previous step emitted, in order. An empty list gives a pass-through
// handler. Every CEL expression is compiled and type-checked here, and every named
// handler is built from its args, so a chain that builds runs without surprises; all
// problems are returned at once, each as a *FieldError naming its field path
// (handlers[2].cel.filter, handlers[0].name, handlers[1].args.pattern).
//
// The returned Handler is safe for concurrent use by several streams as long as every
// named handler in it is (the built-ins are). When a step with `onError: skip` fails
// for any record the chain produced from a source record, the chain returns a
// *SkipError (IsSkip is true) and no outputs: the whole source record is skipped.
func NewChain(specs []config.HandlerSpec, opts ...ChainOption) (Handler, error) {
	o := newOptions("handlers", opts)
	var (
		steps []step
		errs  []error
	)
	for i := range specs {
		path := fmt.Sprintf("%s[%d]", o.fieldPath, i)
		h, err := buildStep(&specs[i], path, &o)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		steps = append(steps, step{path: path, h: h})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	switch len(steps) {
	case 0:
		return passThrough{}, nil
	case 1:
		return &single{step: steps[0]}, nil
	}
	return &chain{steps: steps}, nil
}

func buildStep(spec *config.HandlerSpec, path string, o *options) (Handler, error) {
	switch {
	case spec.CEL != nil && spec.Name != "":
		return nil, &FieldError{Field: path, Detail: "set cel or name, not both"}
	case spec.CEL != nil:
		if len(spec.Args) > 0 {
			return nil, &FieldError{Field: path + ".args", Detail: "args are for named handlers"}
		}
		return newCELHandler(spec.CEL, path, o)
	case strings.TrimSpace(spec.Name) == "":
		return nil, &FieldError{Field: path, Detail: "set cel or name"}
	}
	factory, err := handlers.get(spec.Name)
	if err != nil {
		return nil, &FieldError{Field: path + ".name", Detail: err.Error(), Unregistered: true}
	}
	h, err := callFactory(func() (Handler, error) { return factory(spec.Args) })
	if err != nil {
		return nil, argFieldError(path+".args", err)
	}
	if h == nil {
		return nil, &FieldError{Field: path + ".name", Detail: fmt.Sprintf("handler %q built nothing (its factory returned nil)", spec.Name)}
	}
	return h, nil
}

// callFactory turns a panic in third-party factory code into an error: bad args must
// never crash the process.
func callFactory[T any](f func() (T, error)) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the factory panicked: %v", r)
		}
	}()
	return f()
}

func argFieldError(argsPath string, err error) *FieldError {
	var ae *ArgError
	if errors.As(err, &ae) && ae.Arg != "" {
		return &FieldError{Field: argsPath + "." + ae.Arg, Detail: ae.Detail}
	}
	if ae != nil {
		return &FieldError{Field: argsPath, Detail: ae.Detail}
	}
	return &FieldError{Field: argsPath, Detail: err.Error()}
}

type step struct {
	path string
	h    Handler
}

// run calls the step and puts its path on errors, keeping a *SkipError a *SkipError.
func (s *step) run(ctx context.Context, in *Record, out []*Record) ([]*Record, error) {
	out, err := s.h.Handle(ctx, in, out)
	if err == nil {
		return out, nil
	}
	var skip *SkipError
	if errors.As(err, &skip) {
		if skip.Step == "" {
			return out, &SkipError{Step: s.path, Err: skip.Err}
		}
		return out, err
	}
	return out, fmt.Errorf("while running %s on %s/%d@%d: %w", s.path, in.Topic, in.Partition, in.Offset, err)
}

// passThrough is the chain of an empty handlers list.
type passThrough struct{}

func (passThrough) Handle(_ context.Context, in *Record, out []*Record) ([]*Record, error) {
	return append(out, in), nil
}

// single is a chain of one step: no scratch buffers needed.
type single struct{ step step }

func (c *single) Handle(ctx context.Context, in *Record, out []*Record) ([]*Record, error) {
	n := len(out)
	out, err := c.step.run(ctx, in, out)
	if err != nil {
		return out[:n], err
	}
	return out, nil
}

type chain struct{ steps []step }

// scratch holds the two record lists a chain alternates between; pooled so the hot path
// does not allocate them per record.
type scratch struct{ cur, next []*Record }

var scratchPool = sync.Pool{New: func() any { return &scratch{cur: make([]*Record, 0, 4), next: make([]*Record, 0, 4)} }}

func (c *chain) Handle(ctx context.Context, in *Record, out []*Record) ([]*Record, error) {
	s := scratchPool.Get().(*scratch)
	defer func() {
		clear(s.cur[:cap(s.cur)])
		clear(s.next[:cap(s.next)])
		s.cur, s.next = s.cur[:0], s.next[:0]
		scratchPool.Put(s)
	}()
	s.cur = append(s.cur[:0], in)
	for i := range c.steps {
		s.next = s.next[:0]
		for _, r := range s.cur {
			var err error
			if s.next, err = c.steps[i].run(ctx, r, s.next); err != nil {
				return out, err
			}
		}
		s.cur, s.next = s.next, s.cur
		if len(s.cur) == 0 {
			return out, nil
		}
	}
	return append(out, s.cur...), nil
}
