package topics

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

func TestSelectorMatches(t *testing.T) {
	tests := map[string]struct {
		topics config.Topics
		want   map[string]bool
	}{
		"include is anchored at both ends": {
			topics: config.Topics{Include: []string{"orders"}},
			want:   map[string]bool{"orders": true, "orders-archive": false, "old-orders": false, "": false},
		},
		"alternation stays inside the anchors": {
			topics: config.Topics{Include: []string{"a|b"}},
			want:   map[string]bool{"a": true, "b": true, "ab": false, "xb": false, "ax": false},
		},
		"explicit anchors still work": {
			topics: config.Topics{Include: []string{"^orders\\..*$"}},
			want:   map[string]bool{"orders.eu": true, "orders": false},
		},
		"several includes": {
			topics: config.Topics{Include: []string{"orders\\..*", "payments"}},
			want:   map[string]bool{"orders.eu": true, "payments": true, "payments.eu": false, "ordersx": false},
		},
		"exclude wins over include": {
			topics: config.Topics{Include: []string{"orders\\..*"}, Exclude: []string{"orders\\.tmp\\..*"}},
			want:   map[string]bool{"orders.eu": true, "orders.tmp.1": false, "orders.tmp": true},
		},
		"exclude is anchored too": {
			topics: config.Topics{Include: []string{".*"}, Exclude: []string{"tmp"}},
			want:   map[string]bool{"tmp": false, "tmp2": true, "my-tmp": true},
		},
		"internal topics are never selected": {
			topics: config.Topics{Include: []string{".*", "__consumer_offsets", "__.*"}},
			want: map[string]bool{
				"__consumer_offsets": false, "__transaction_state": false, "__x": false,
				"_schemas": true, "a__b": true,
			},
		},
		"no include selects nothing": {
			topics: config.Topics{},
			want:   map[string]bool{"orders": false},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s, err := NewSelector(tc.topics)
			if err != nil {
				t.Fatalf("NewSelector: %v", err)
			}
			for topic, want := range tc.want {
				if got := s.Matches(topic); got != want {
					t.Errorf("Matches(%q) = %v, want %v", topic, got, want)
				}
			}
		})
	}
}

func TestSelectorTargetName(t *testing.T) {
	tests := map[string]struct {
		rename *config.Rename
		source string
		want   string
	}{
		"no rename keeps the name":    {rename: nil, source: "orders", want: "orders"},
		"empty rename keeps the name": {rename: &config.Rename{}, source: "orders", want: "orders"},
		"prefix":                      {rename: &config.Rename{Prefix: "dc1."}, source: "orders", want: "dc1.orders"},
		"template":                    {rename: &config.Rename{Template: "dc1.{topic}.mirror"}, source: "orders", want: "dc1.orders.mirror"},
		"template with topic twice":   {rename: &config.Rename{Template: "{topic}-{topic}"}, source: "a", want: "a-a"},
		"identity template":           {rename: &config.Rename{Template: "{topic}"}, source: "orders", want: "orders"},
		"stripPrefix":                 {rename: &config.Rename{StripPrefix: "dc1."}, source: "dc1.orders", want: "orders"},
		"stripPrefix once":            {rename: &config.Rename{StripPrefix: "dc1."}, source: "dc1.dc1.orders", want: "dc1.orders"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s, err := NewSelector(config.Topics{Include: []string{".*"}, Rename: tc.rename})
			if err != nil {
				t.Fatalf("NewSelector: %v", err)
			}
			if got := s.TargetName(tc.source); got != tc.want {
				t.Errorf("TargetName(%q) = %q, want %q", tc.source, got, tc.want)
			}
		})
	}
}

// TestSelectorStripPrefixSelectsOnlyPrefixedTopics: with rename.stripPrefix, a topic
// the expressions match but that does not start with the prefix (or is the prefix
// alone) is not mirrored: it has no name to strip the prefix from.
func TestSelectorStripPrefixSelectsOnlyPrefixedTopics(t *testing.T) {
	s, err := NewSelector(config.Topics{Include: []string{".*"}, Rename: &config.Rename{StripPrefix: "dc1."}})
	if err != nil {
		t.Fatalf("NewSelector: %v", err)
	}
	for topic, want := range map[string]bool{"dc1.orders": true, "dc1.orders.eu": true, "dc1.": false, "orders": false, "dc2.orders": false, "xdc1.orders": false} {
		if got := s.Matches(topic); got != want {
			t.Errorf("Matches(%q) = %v, want %v", topic, got, want)
		}
	}
	if got := s.Select([]string{"orders", "dc1.orders", "dc1."}); !slices.Equal(got, []string{"dc1.orders"}) {
		t.Errorf("Select = %q, want [dc1.orders]", got)
	}
}

func TestSelectorSelect(t *testing.T) {
	s, err := NewSelector(config.Topics{
		Include: []string{"orders\\..*", "payments"},
		Exclude: []string{"orders\\.tmp\\..*"},
	})
	if err != nil {
		t.Fatalf("NewSelector: %v", err)
	}
	in := []string{"payments", "orders.us", "__consumer_offsets", "orders.tmp.x", "orders.eu", "audit", "orders.us"}
	want := []string{"orders.eu", "orders.us", "payments"}
	if got := s.Select(in); !reflect.DeepEqual(got, want) {
		t.Errorf("Select = %q, want %q", got, want)
	}
	if got := s.Select(nil); len(got) != 0 {
		t.Errorf("Select(nil) = %q, want empty", got)
	}
}

func TestNewSelectorErrors(t *testing.T) {
	tests := map[string]struct {
		topics config.Topics
		want   string
	}{
		"bad include": {topics: config.Topics{Include: []string{"ok", "("}}, want: "topics.include[1]"},
		"bad exclude": {topics: config.Topics{Include: []string{"ok"}, Exclude: []string{"[a-"}}, want: "topics.exclude[0]"},
		// A pattern that closes the anchoring group early must fail rather than
		// silently match more than the user wrote.
		"pattern escaping the anchor group": {topics: config.Topics{Include: []string{"a)|(b"}}, want: "topics.include[0]"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := NewSelector(tc.topics)
			if err == nil {
				t.Fatalf("NewSelector: no error, want one naming %s", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not name %s", err, tc.want)
			}
		})
	}
}
