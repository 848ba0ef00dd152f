package topics

import (
	"errors"
	"fmt"
	"regexp"
	"sort"

	"github.com/IBM/sarama"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// ConfigFilter says which topic configs a Syncer copies from a source topic to its
// target: every config set on the source topic itself (not a cluster default), except
// the ones whose whole name matches an exclude pattern, and never a sensitive one.
type ConfigFilter struct {
	exclude []*regexp.Regexp
}

// defaultConfigFilter is the filter of config.DefaultTopicConfigExclude, used when
// SyncOptions.ConfigFilter is nil.
var defaultConfigFilter = mustConfigFilter(config.DefaultTopicConfigExclude)

func mustConfigFilter(exclude []string) *ConfigFilter {
	f, err := NewConfigFilter(exclude)
	if err != nil {
		panic(err) // the defaults are constants; TestDefaultConfigFilter compiles them
	}
	return f
}

// NewConfigFilter compiles exclude (topics.configExclude), each pattern matching whole
// config names. An empty list excludes nothing.
func NewConfigFilter(exclude []string) (*ConfigFilter, error) {
	f := &ConfigFilter{}
	for i, p := range exclude {
		re, err := regexp.Compile("^(?:" + p + ")$")
		if err != nil {
			return nil, fmt.Errorf("while compiling topics.configExclude[%d] %q: %w", i, p, err)
		}
		f.exclude = append(f.exclude, re)
	}
	return f, nil
}

// Copies reports whether a config of this name is copied to target topics.
func (f *ConfigFilter) Copies(name string) bool {
	for _, re := range f.exclude {
		if re.MatchString(name) {
			return false
		}
	}
	return true
}

// topicConfigs is the result of describing the configs of one topic.
type topicConfigs struct {
	// values holds every returned config by name (defaults included).
	values map[string]string
	// explicit holds the configs set on the topic itself that the filter copies.
	explicit map[string]string
	err      error
}

// describeConfigs describes every config of topics in one request. A request-level
// failure is returned as the error; a failure for one topic is kept in that topic's
// entry so the others go on.
func describeConfigs(admin sarama.ClusterAdmin, topics []string, filter *ConfigFilter) (map[string]topicConfigs, error) {
	out := make(map[string]topicConfigs, len(topics))
	if len(topics) == 0 {
		return out, nil
	}
	resources := make([]*sarama.ConfigResource, 0, len(topics))
	for _, t := range topics {
		resources = append(resources, &sarama.ConfigResource{Type: sarama.TopicResource, Name: t})
	}
	results, err := admin.DescribeConfigs(resources, sarama.DescribeConfigsOptions{})
	if err != nil {
		return nil, err
	}
	for _, r := range results {
		tc := topicConfigs{values: map[string]string{}, explicit: map[string]string{}}
		if r.ErrorCode != sarama.ErrNoError {
			tc.err = describeError(r)
			out[r.Name] = tc
			continue
		}
		for _, e := range r.Configs {
			if e.Sensitive {
				continue
			}
			tc.values[e.Name] = e.Value
			if e.Source == sarama.SourceTopic && filter.Copies(e.Name) {
				tc.explicit[e.Name] = e.Value
			}
		}
		out[r.Name] = tc
	}
	for _, t := range topics {
		if _, ok := out[t]; !ok {
			out[t] = topicConfigs{err: sarama.ErrIncompleteResponse}
		}
	}
	return out, nil
}

func describeError(r *sarama.ConfigResourceResult) error {
	if r.ErrorMsg != "" {
		return fmt.Errorf("%w: %s", r.ErrorCode, r.ErrorMsg)
	}
	return r.ErrorCode
}

// configChanges returns the configs whose target value differs from the value set
// explicitly on the source. Target configs the source does not set are left alone: the
// target may have its own reasons for them (so a config removed from the source keeps
// its last value on the target).
func configChanges(source, target topicConfigs) map[string]string {
	changes := map[string]string{}
	for name, want := range source.explicit {
		if got, ok := target.values[name]; !ok || got != want {
			changes[name] = want
		}
	}
	return changes
}

// RefusedConfig is a source topic config that the target cluster would not take, for
// one target topic. The topic is mirrored all the same, without it.
type RefusedConfig struct {
	// Name is the config name, for example "confluent.placement.constraints".
	Name string
	// Value is the source's value that was refused.
	Value string
	// Err is the target's answer.
	Err error
}

// String names the config, its value and the cause, for logs and status.
func (r RefusedConfig) String() string {
	return fmt.Sprintf("%s=%s (%v)", r.Name, r.Value, r.Err)
}

// isConfigRefusal reports whether err is the target refusing a config name or value,
// rather than the request failing: an unknown or invalid config, or a broker policy.
// Only then does the sync try the configs one by one and go on without the refused.
func isConfigRefusal(err error) bool {
	for _, kerr := range []sarama.KError{sarama.ErrInvalidConfig, sarama.ErrInvalidRequest, sarama.ErrPolicyViolation} {
		if errors.Is(err, kerr) {
			return true
		}
	}
	return false
}

// splitRefused applies each config alone with try and returns the ones it refused, in
// name order, and the accepted rest. Any other error stops it and is returned.
func splitRefused(configs map[string]string, try func(name, value string) error) (accepted map[string]string, refused []RefusedConfig, err error) {
	accepted = make(map[string]string, len(configs))
	for _, name := range sortedKeys(configs) {
		err := try(name, configs[name])
		switch {
		case err == nil:
			accepted[name] = configs[name]
		case isConfigRefusal(err):
			refused = append(refused, RefusedConfig{Name: name, Value: configs[name], Err: err})
		default:
			return nil, nil, err
		}
	}
	return accepted, refused, nil
}

func refusedNames(refused []RefusedConfig) []string {
	names := make([]string, 0, len(refused))
	for _, r := range refused {
		names = append(names, r.Name)
	}
	return names
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
