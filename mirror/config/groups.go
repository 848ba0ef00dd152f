package config

import (
	"fmt"
	"regexp"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// DefaultGroupSyncInterval is how often source group offsets are translated when
// groups.syncInterval is unset.
const DefaultGroupSyncInterval = 30 * time.Second

// GroupsEnabled reports whether consumer-group offset translation is configured.
func (c *Config) GroupsEnabled() bool { return c.Groups != nil }

// TranslationRefused returns why source offsets of this config cannot be translated
// to target offsets, with the field that prevents it (rooted at root), or nil. Offset
// translation needs every source record to become at most one target record in the
// same partition number of the (renamed) topic: hash and round-robin partitioning move
// records between partitions, a named handler may fan a record out, and a CEL
// transform of the topic or partition moves it.
func (c *Config) TranslationRefused(root *field.Path) *field.Error {
	if c.Partitioning != "" && c.Partitioning != PartitioningPreserve {
		return field.Forbidden(root.Child("partitioning"), fmt.Sprintf("offset translation (groups) needs partitioning: preserve; %s moves records to other partitions, so source offsets have no target offsets", c.Partitioning))
	}
	for i, h := range c.Handlers {
		p := root.Child("handlers").Index(i)
		switch {
		case h.Name != "":
			return field.Forbidden(p.Child("name"), "offset translation (groups) needs one target record per source record in the same partition; a named handler may fan a record out")
		case h.CEL != nil && h.CEL.Transform != nil && (h.CEL.Transform.Topic != "" || h.CEL.Transform.Partition != ""):
			return field.Forbidden(p.Child("cel", "transform"), "offset translation (groups) needs records to stay in their partition; a transform of topic or partition moves them")
		}
	}
	return nil
}

func (c *Config) defaultGroups() {
	if g := c.Groups; g != nil && g.SyncInterval.Duration == 0 {
		g.SyncInterval.Duration = DefaultGroupSyncInterval
	}
}

func (c *Config) validateGroups(root *field.Path) field.ErrorList {
	g := c.Groups
	if g == nil {
		return nil
	}
	var errs field.ErrorList
	p := root.Child("groups")
	if len(g.Include) == 0 {
		errs = append(errs, field.Required(p.Child("include"), "at least one regular expression selecting source consumer groups"))
	}
	for _, list := range []struct {
		name     string
		patterns []string
	}{{"include", g.Include}, {"exclude", g.Exclude}} {
		for i, re := range list.patterns {
			if _, err := regexp.Compile(re); err != nil {
				errs = append(errs, field.Invalid(p.Child(list.name).Index(i), re, err.Error()))
			}
		}
	}
	if g.SyncInterval.Duration <= 0 {
		errs = append(errs, field.Invalid(p.Child("syncInterval"), g.SyncInterval.String(), "must be a positive duration"))
	}
	if err := c.TranslationRefused(root); err != nil {
		errs = append(errs, err)
	}
	return errs
}
