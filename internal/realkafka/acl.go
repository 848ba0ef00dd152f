package realkafka

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ACL is one rule allowing Principal one Operation on one resource. A flat list of
// them, rather than kadm's builder, lets a test grant a documented set and then take
// each rule away in turn.
type ACL struct {
	// Principal is "User:<name>".
	Principal string
	// Resource is kmsg.ACLResourceTypeTopic, Group, TransactionalId or Cluster.
	Resource kmsg.ACLResourceType
	// Name is the topic, group or transactional id (unused for the cluster).
	Name string
	// Prefixed makes Name a prefix rather than a literal name.
	Prefixed bool
	// Operation is what is allowed: kadm.OpRead, OpWrite, OpDescribe, ...
	Operation kadm.ACLOperation
}

// String reads like the rule: "User:mirror Write on topic e2e.* (prefixed)".
func (a ACL) String() string {
	res := map[kmsg.ACLResourceType]string{
		kmsg.ACLResourceTypeTopic: "topic", kmsg.ACLResourceTypeGroup: "group",
		kmsg.ACLResourceTypeTransactionalId: "transactional id", kmsg.ACLResourceTypeCluster: "cluster",
	}[a.Resource]
	s := fmt.Sprintf("%s %s on %s", a.Principal, a.Operation, res)
	if a.Resource != kmsg.ACLResourceTypeCluster {
		s += " " + a.Name
		if a.Prefixed {
			s += "* (prefixed)"
		}
	}
	return s
}

// builder is the kadm form of the rule.
func (a ACL) builder() *kadm.ACLBuilder {
	b := kadm.NewACLs().Allow(a.Principal).AllowHosts("*").Operations(a.Operation)
	switch a.Resource {
	case kmsg.ACLResourceTypeTopic:
		b.Topics(a.Name)
	case kmsg.ACLResourceTypeGroup:
		b.Groups(a.Name)
	case kmsg.ACLResourceTypeTransactionalId:
		b.TransactionalIDs(a.Name)
	case kmsg.ACLResourceTypeCluster:
		b.Clusters()
	}
	if a.Prefixed {
		return b.ResourcePatternType(kadm.ACLPatternPrefixed)
	}
	return b.ResourcePatternType(kadm.ACLPatternLiteral)
}

// Grant creates the ACLs and waits until every broker's authorizer holds them.
func (c *Cluster) Grant(ctx context.Context, acls ...ACL) error {
	for _, a := range acls {
		res, err := c.admin.CreateACLs(ctx, a.builder())
		if err == nil {
			for _, r := range res {
				if r.Err != nil {
					err = r.Err
				}
			}
		}
		if err != nil {
			return fmt.Errorf("realkafka: while granting %s on %s: %w", a, c.opts.Name, err)
		}
	}
	return c.waitACLs(ctx, acls, true)
}

// Revoke deletes the ACLs and waits until no broker's authorizer holds them.
func (c *Cluster) Revoke(ctx context.Context, acls ...ACL) error {
	for _, a := range acls {
		res, err := c.admin.DeleteACLs(ctx, a.builder())
		if err == nil {
			for _, r := range res {
				if r.Err != nil {
					err = r.Err
				}
			}
		}
		if err != nil {
			return fmt.Errorf("realkafka: while revoking %s on %s: %w", a, c.opts.Name, err)
		}
	}
	return c.waitACLs(ctx, acls, false)
}

// waitACLs polls every running broker until each holds all of acls (present) or none of
// them: ACLs are metadata records, applied by each broker some time after the controller
// committed them.
func (c *Cluster) waitACLs(ctx context.Context, acls []ACL, present bool) error {
	for {
		pending := ""
		for _, n := range c.nodes {
			if !c.Running(n.id) {
				continue
			}
			for _, a := range acls {
				has, err := brokerHasACL(ctx, n, a)
				if err != nil || has != present {
					pending = fmt.Sprintf("broker %d: %s present=%v (%v)", n.id, a, has, err)
					break
				}
			}
		}
		if pending == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("realkafka: ACLs on %s not applied: %w (%s)", c.opts.Name, ctx.Err(), pending)
		case <-time.After(readyPollInterval):
		}
	}
}

// brokerHasACL asks broker n alone whether its authorizer holds a.
func brokerHasACL(ctx context.Context, n *node, a ACL) (bool, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(n.addr()), kgo.RequestRetries(0))
	if err != nil {
		return false, err
	}
	defer cl.Close()
	req := kmsg.NewPtrDescribeACLsRequest()
	req.ResourceType = a.Resource
	req.ResourceName = kmsg.StringPtr(a.Name)
	if a.Resource == kmsg.ACLResourceTypeCluster {
		req.ResourceName = kmsg.StringPtr("kafka-cluster")
	}
	req.ResourcePatternType = kmsg.ACLResourcePatternTypeLiteral
	if a.Prefixed {
		req.ResourcePatternType = kmsg.ACLResourcePatternTypePrefixed
	}
	req.Principal = kmsg.StringPtr(a.Principal)
	req.Operation = a.Operation
	req.PermissionType = kmsg.ACLPermissionTypeAllow
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	kresp, err := cl.SeedBrokers()[0].Request(ctx, req)
	if err != nil {
		return false, err
	}
	resp := kresp.(*kmsg.DescribeACLsResponse)
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return false, err
	}
	return len(resp.Resources) > 0, nil
}
