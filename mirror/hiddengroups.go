package mirror

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/IBM/sarama"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
)

// Kafka lists a consumer group only to a principal that may Describe it, so a source
// group hidden by the source's ACLs looks like a group that does not exist: its offsets
// would silently never be translated. checkHidden tells the two apart where it can.

// checkHidden runs after each listing. A groups.include entry that is a plain name and
// was not listed is asked for by name, once: a refusal is logged as an error naming the
// principal, the operation and the group. When nothing is listed at all, it says once,
// at info level, that a group is listed only to a principal that may Describe it.
func (c *groupCheckpointer) checkHidden(listed []string) {
	if c.hiddenAsked == nil {
		c.hiddenAsked = map[string]bool{}
	}
	principal := kafka.Principal(c.tr.cfg.Source)
	switch {
	case len(listed) > 0:
		c.noneSaid = false
	case !c.noneSaid:
		c.noneSaid = true
		c.log.Info("groups.include selects no source consumer group yet (Kafka lists a group only to a principal that may DESCRIBE it: check the source's group ACLs if the groups exist)",
			"include", c.tr.cfg.Groups.Include, "principal", principal)
	}
	for i, pattern := range c.tr.cfg.Groups.Include {
		name, ok := plainGroupName(pattern)
		if !ok || !c.sel.Matches(name) || slices.Contains(listed, name) || c.hiddenAsked[name] {
			continue
		}
		c.hiddenAsked[name] = true
		switch err := describeGroupOffsets(c.tr.sourceAdmin, name); {
		case errors.Is(err, sarama.ErrGroupAuthorizationFailed):
			c.log.Error(err, fmt.Sprintf("Source consumer group hidden by the source's ACLs: %s is not authorized to DESCRIBE GROUP %q (groups.include[%d]); grant it to translate the group",
				principalOrClient(principal), name, i),
				"group", name, "operation", "DESCRIBE", "resourceType", "GROUP", "principal", principal)
		case err != nil:
			c.log.Error(err, fmt.Sprintf("Failed to ask the source for consumer group %q (groups.include[%d]), which it does not list", name, i),
				"group", name, "principal", principal)
		}
	}
}

// describeGroupOffsets asks for group's committed offsets (OffsetFetch, which needs
// Describe on the group) and returns the refusal, if any.
func describeGroupOffsets(admin sarama.ClusterAdmin, group string) error {
	resp, err := admin.ListConsumerGroupOffsets(group, nil)
	if err != nil {
		return err
	}
	if resp.Err != sarama.ErrNoError {
		return resp.Err
	}
	return nil
}

func principalOrClient(principal string) string {
	if principal == "" {
		return "the mirror's client"
	}
	return "principal " + principal
}

// plainGroupName returns the group name an include expression stands for when it is a
// plain name: no regular-expression syntax but dots, bare or escaped (a bare dot
// matches itself too).
func plainGroupName(pattern string) (string, bool) {
	name := strings.ReplaceAll(pattern, `\.`, ".")
	if name == "" || strings.ContainsAny(name, `\+*?()|[]{}^$`) {
		return "", false
	}
	return name, true
}
