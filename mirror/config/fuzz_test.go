package config

import (
	"reflect"
	"strings"
	"testing"
)

// FuzzParse checks that no input makes Parse panic and that every config Parse accepts
// survives the trip the operator makes: Marshal into the ConfigMap, Parse in the pod.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		minimal,
		canonical,
		minimal + "streams: 64\npartitioning: hash\n",
		minimal + "handlers: [{cel: {filter: 'true', transform: {topic: \"'x'\"}, onError: skip}}, {name: identity}]\n",
		minimal + "rebalanceListener: {name: log, args: {verbosity: '1'}}\n",
		minimal + "offsetCommitInterval: 1h2m3.5s\n",
		minimal + "topics: {include: [a], rename: {template: 'x.{topic}'}}\n",
		"",
		minimal + "handlers: []\n",
		// Found next: empty lists and maps that Marshal leaves out (testdata/fuzz/FuzzParse
		// holds the original input, exclude: []).
		minimal + "handlers: [{name: identity, args: {}}]\nrebalanceListener: {name: log, args: {}}\n",
		strings.Replace(minimal, "topics: {include:", "topics: {exclude: [], configExclude: [], include:", 1),
		"apiVersion: kafkamirror.io/v1alpha1\nkind: MirrorConfig\nsourCe: {bootstrapServers: [a:1]}\n",
		"a: [",
		"{}",
		`{"apiVersion":"kafkamirror.io/v1alpha1"}`,
		minimal + "streams: 1e100\n",
		minimal + "deliveryTimeout: -5s\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			return
		}
		out, err := Marshal(c)
		if err != nil {
			t.Fatalf("Marshal of a valid config: %v", err)
		}
		back, err := Parse(out)
		if err != nil {
			t.Fatalf("Parse(Marshal(c)) of a valid config: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(back, c) {
			t.Fatalf("round trip changed the config:\n%s\nbefore %+v\nafter  %+v", out, c, back)
		}
	})
}
