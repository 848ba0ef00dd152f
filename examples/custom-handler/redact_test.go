package main

import (
	"context"
	"testing"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/handler"
)

func TestEmailRedactor(t *testing.T) {
	tests := map[string]struct {
		args  map[string]string
		value []byte
		want  []byte
	}{
		"address in a JSON value": {
			value: []byte(`{"id":7,"email":"ada@example.com","note":"cc bob.smith+x@mail.example.org"}`),
			want:  []byte(`{"id":7,"email":"[redacted]","note":"cc [redacted]"}`),
		},
		"own replacement": {
			args:  map[string]string{"replacement": "***"},
			value: []byte(`["ada@example.com"]`),
			want:  []byte(`["***"]`),
		},
		"no address: unchanged": {value: []byte(`{"amount": 1.50}`), want: []byte(`{"amount": 1.50}`)},
		"not JSON: unchanged":   {value: []byte(`mail ada@example.com`), want: []byte(`mail ada@example.com`)},
		"tombstone stays null":  {value: nil, want: nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h, err := newEmailRedactor(tc.args)
			if err != nil {
				t.Fatal(err)
			}
			out, err := h.Handle(context.Background(), &handler.Record{Topic: "users", Value: tc.value}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(out) != 1 {
				t.Fatalf("emitted %d records, want 1", len(out))
			}
			if string(out[0].Value) != string(tc.want) || (tc.want == nil) != (out[0].Value == nil) {
				t.Errorf("value = %q, want %q", out[0].Value, tc.want)
			}
		})
	}
}

func TestEmailRedactorArgs(t *testing.T) {
	tests := map[string]struct {
		args    map[string]string
		wantErr string
	}{
		"replacement with @": {args: map[string]string{"replacement": "x@y"}, wantErr: `replacement: must not contain "@", a quote or a backslash: the value must stay valid JSON without an address`},
		"misspelt argument":  {args: map[string]string{"replace": "x"}, wantErr: "replace: unknown argument (accepted: replacement)"},
		"no args":            {args: nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := newEmailRedactor(tc.args)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tc.wantErr {
				t.Fatalf("error = %q, want %q", gotErr, tc.wantErr)
			}
		})
	}
}
