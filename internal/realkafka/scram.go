package realkafka

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kadm"
)

// scramIterations is the SCRAM-SHA-512 iteration count of the users AddSCRAMUser creates
// (Kafka's minimum, 4096: the tests need the mechanism, not the cost).
const scramIterations = 4096

// AddSCRAMUser creates (or updates) a SCRAM-SHA-512 user with the admin API
// (AlterUserScramCredentials), the way an operator of a KRaft cluster does.
func (c *Cluster) AddSCRAMUser(ctx context.Context, user, password string) error {
	res, err := c.admin.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{
		User: user, Mechanism: kadm.ScramSha512, Iterations: scramIterations, Password: password,
	}})
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		return fmt.Errorf("realkafka: while creating the SCRAM-SHA-512 user %s on %s: %w", user, c.opts.Name, err)
	}
	return nil
}
