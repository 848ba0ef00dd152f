package handler

import "context"

// identity emits every record unchanged. It is useful as a placeholder step and as the
// smallest example of a Handler.
type identity struct{}

func newIdentity(args map[string]string) (Handler, error) {
	if err := CheckArgs(args, nil, nil); err != nil {
		return nil, err
	}
	return identity{}, nil
}

func (identity) Handle(_ context.Context, in *Record, out []*Record) ([]*Record, error) {
	return append(out, in), nil
}
