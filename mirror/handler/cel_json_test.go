package handler

import (
	"reflect"
	"testing"
)

var jsonSeeds = []string{
	`{"id":12345,"region":"eu","amount":12.5,"items":[{"sku":"a"},{"sku":"b"}]}`,
	`[]`, `{}`, `[[],{}]`, `null`, `true`, `false`, `0`, `-0`, `-1`, `1.5e3`, `1E-2`, `-0.0`,
	`123456789012345678`, `1234567890123456789`, `9223372036854775807`, `9223372036854775808`,
	`-9223372036854775808`, `-9223372036854775809`, `1e400`, `-1e400`, `1e-400`,
	`"plain"`, `"esc \" \\ \/ \b \f \n \r \t"`, `"\u00e9\u4e2d"`, `"\ud83d\ude00"`, `"\ud83d"`, `"\ude00"`,
	`"\ud83dx"`, `"é中😀"`, "\"\xff\"", "\"\t\"", `"\x"`, `"\u12"`,
	` { "a" : [ 1 , 2 ] } `, `{"a":1,"a":2}`, `{"a":1,}`, `[1,]`, `[1 2]`, `{"a" 1}`, `{a:1}`,
	`01`, `1.`, `.5`, `-`, `+1`, `1e`, `1e+`, `tru`, `nul`, `1 2`, `1 }`, ``, ` `, `"unterminated`,
	`[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]`,
}

func TestFastJSONMatchesEncodingJSON(t *testing.T) {
	for _, s := range jsonSeeds {
		checkFastJSON(t, []byte(s))
	}
}

// checkFastJSON: whenever fastJSON accepts, encoding/json accepts too and gives the
// same value; fastJSON may refuse what encoding/json accepts (the slow path takes it).
func checkFastJSON(t *testing.T, b []byte) {
	t.Helper()
	got, ok := fastJSON(b)
	if !ok {
		return
	}
	want, err := slowJSON(b)
	if err != nil {
		t.Fatalf("fastJSON accepted %q, which encoding/json rejects: %v", b, err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("fastJSON(%q) = %#v, encoding/json gives %#v", b, got, want)
	}
}

// The fast path must accept what it is for, or it would be no faster.
func TestFastJSONAcceptsTypicalDocuments(t *testing.T) {
	for _, s := range []string{jsonSeeds[0], `{"k":"\u00e9","n":null,"b":[true,false],"f":-1.5e-3}`, `"\ud83d\ude00"`} {
		if _, ok := fastJSON([]byte(s)); !ok {
			t.Errorf("fastJSON refused %s", s)
		}
	}
}

func FuzzFastJSON(f *testing.F) {
	for _, s := range jsonSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) { checkFastJSON(t, b) })
}
