package kafka

import (
	"github.com/IBM/sarama"
	"github.com/xdg-go/scram"
)

var (
	sha256Hash = scram.SHA256
	sha512Hash = scram.SHA512
)

// scramClient adapts an xdg-go/scram conversation to sarama's SCRAMClient. sarama
// creates one per broker connection through the generator function.
type scramClient struct {
	hash scram.HashGeneratorFcn
	conv *scram.ClientConversation
}

var _ sarama.SCRAMClient = (*scramClient)(nil)

func newSCRAMClient(hash scram.HashGeneratorFcn) *scramClient {
	return &scramClient{hash: hash}
}

// Begin starts a conversation for one authentication.
func (c *scramClient) Begin(user, password, authzID string) error {
	cl, err := c.hash.NewClient(user, password, authzID)
	if err != nil {
		return err
	}
	c.conv = cl.NewConversation()
	return nil
}

// Step answers one server challenge.
func (c *scramClient) Step(challenge string) (string, error) {
	return c.conv.Step(challenge)
}

// Done reports whether the conversation has finished.
func (c *scramClient) Done() bool {
	return c.conv.Done()
}
