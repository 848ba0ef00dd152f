package mirror

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/IBM/sarama"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/kafka"
)

// Static group membership (KIP-345, consumer.groupInstanceId).
//
// A dynamic member that is killed stays in the group until its session times out:
// the group rebalances only then, and the restarted process, a new member, waits for
// that. A static member rejoining under its instance ID takes its old place at once
// (the coordinator hands it its old partitions). The other side of it: a static member
// never leaves on its own, sarama's Close only forgets the member ID, so a clean stop
// would leave its partitions idle for the session timeout. The engine therefore removes
// its static members itself after the drain and the final commit (leave): a clean stop
// hands over at once, as with dynamic membership, and only a crash keeps the place.

// leaveLimit bounds the LeaveGroup request of a stopping static member: past it the
// member's partitions move after the session timeout instead, nothing is lost.
const leaveLimit = 5 * time.Second

// instanceID is the static membership ID of stream id of cfg: consumer.groupInstanceId
// (resolved from the environment for "${NAME}") and the stream index, or "" for a
// dynamic member.
func instanceID(cfg *config.Config, id int) string {
	if cfg.Consumer == nil || cfg.Consumer.GroupInstanceID == "" {
		return ""
	}
	base := kafka.ResolveEnv(cfg.Consumer.GroupInstanceID)
	if base == "" {
		return ""
	}
	return fmt.Sprintf("%s-%d", base, id)
}

// leave removes the stream's static member from the group once the group is closed
// (its sessions drained and committed), so that the other members take its partitions
// at once. It names the member ID of the stream's last session: a process that already
// took the instance ID over (a restart racing this stop) is not removed. A dynamic
// member left in Close.
func (s *stream) leave() {
	s.mu.Lock()
	iid, member := s.instanceID, s.memberID
	s.mu.Unlock()
	if iid == "" || member == "" || s.e.aborted.Load() { // Abort plays a killed process
		return
	}
	done := make(chan error, 1)
	go func() { done <- leaveGroup(s.client, s.e.cfg.ConsumerGroup, member, iid) }()
	select {
	case err := <-done:
		if err != nil {
			s.log.Error(err, "Failed to remove the static member from the consumer group; its partitions move when its session times out",
				"group", s.e.cfg.ConsumerGroup)
			return
		}
		s.log.V(1).Info("Removed the static member from the consumer group", "group", s.e.cfg.ConsumerGroup, "member", member)
	case <-time.After(leaveLimit):
		s.log.Info("Gave up removing the static member from the consumer group; its partitions move when its session times out",
			"group", s.e.cfg.ConsumerGroup, "after", leaveLimit)
	}
}

// leaveGroup sends a LeaveGroup (version 3, which names static members) for member
// under instance ID iid to group's coordinator.
func leaveGroup(client sarama.Client, group, member, iid string) error {
	if client.Closed() {
		return errors.New("the source client is closed")
	}
	coord, err := client.Coordinator(group)
	if err != nil {
		return fmt.Errorf("while finding the coordinator of group %q: %w", group, err)
	}
	resp, err := coord.LeaveGroup(&sarama.LeaveGroupRequest{
		Version: 3,
		GroupId: group,
		Members: []sarama.MemberIdentity{{MemberId: member, GroupInstanceId: &iid}},
	})
	if err != nil {
		_ = client.RefreshCoordinator(group)
		return err
	}
	if !errors.Is(resp.Err, sarama.ErrNoError) {
		return resp.Err
	}
	for _, m := range resp.Members {
		if !errors.Is(m.Err, sarama.ErrNoError) {
			return m.Err
		}
	}
	return nil
}

// checkStaticAssignment looks, once the first session of a static stream started, for
// partitions of the subscribed topics that no member of the group owns. A static member
// that rejoins in its old place gets its old assignment back without a rebalance, which
// names no partition added while it was away, and sarama rejoins only for partition
// counts that change during a session: such partitions would wait for good. When the
// group is stable and one is unowned, the stream ends its session (drained and
// committed) and leaves, so that it joins again as a new member and the group
// rebalances over every partition.
func (s *stream) checkStaticAssignment(sess sarama.ConsumerGroupSession) {
	s.mu.Lock()
	topics, end := s.subscribed, s.endSession
	s.mu.Unlock()
	unowned, err := unownedPartitions(s.client, s.e.cfg.ConsumerGroup, topics)
	if err != nil {
		s.log.V(1).Info("Could not check the group's assignment after a static rejoin", "error", err.Error())
		return
	}
	if len(unowned) == 0 || sess.Context().Err() != nil {
		return
	}
	s.log.Info("Rejoining the consumer group as a new member: it kept an assignment from before partitions were added, and no member owns them",
		"group", s.e.cfg.ConsumerGroup, "unowned", strings.Join(unowned, ","))
	s.mu.Lock()
	s.rejoin = true
	s.mu.Unlock()
	end()
}

// takeRejoin reports, once, whether checkStaticAssignment asked for a rejoin.
func (s *stream) takeRejoin() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.rejoin
	s.rejoin = false
	return r
}

// unownedPartitions lists the partitions of topics that no member of the stable group
// owns, as topic/partition; none while the group rebalances (the rebalance assigns
// every partition).
func unownedPartitions(client sarama.Client, group string, topics []string) ([]string, error) {
	coord, err := client.Coordinator(group)
	if err != nil {
		return nil, err
	}
	resp, err := coord.DescribeGroups(&sarama.DescribeGroupsRequest{Version: 0, Groups: []string{group}})
	if err != nil {
		return nil, err
	}
	if len(resp.Groups) != 1 {
		return nil, fmt.Errorf("the coordinator described %d groups, want 1", len(resp.Groups))
	}
	g := resp.Groups[0]
	if !errors.Is(g.Err, sarama.ErrNoError) {
		return nil, g.Err
	}
	if g.State != "Stable" {
		return nil, nil
	}
	owned := map[partitionKey]bool{}
	for _, m := range g.Members {
		a, err := m.GetMemberAssignment()
		if err != nil || a == nil {
			return nil, fmt.Errorf("while reading a member's assignment: %w", err)
		}
		for topic, parts := range a.Topics {
			for _, p := range parts {
				owned[partitionKey{topic, p}] = true
			}
		}
	}
	var unowned []string
	for _, topic := range topics {
		parts, err := client.Partitions(topic)
		if err != nil {
			return nil, err
		}
		for _, p := range parts {
			if !owned[partitionKey{topic, p}] {
				unowned = append(unowned, fmt.Sprintf("%s/%d", topic, p))
			}
		}
	}
	slices.Sort(unowned)
	return unowned, nil
}
