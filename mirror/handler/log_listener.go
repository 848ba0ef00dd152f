package handler

import (
	"context"
	"fmt"
	"strconv"

	"github.com/go-logr/logr"
)

// logListener is the built-in `log` rebalance listener: one structured log line per
// assignment change, listing the partitions.
//
// Args:
//
//	verbosity: the logr verbosity of the lines (0, the default, is info level).
type logListener struct {
	log logr.Logger
	v   int
}

func newLogListener(args map[string]string) (RebalanceListener, error) {
	if err := CheckArgs(args, nil, []string{"verbosity"}); err != nil {
		return nil, err
	}
	l := &logListener{log: logr.Discard()}
	if s, ok := args["verbosity"]; ok {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 {
			return nil, &ArgError{Arg: "verbosity", Detail: fmt.Sprintf("%q is not a non-negative integer", s)}
		}
		l.v = v
	}
	return l, nil
}

func (l *logListener) OnAssigned(_ context.Context, partitions []TopicPartition) error {
	l.log.V(l.v).Info("Assigned partitions", "partitions", partitionNames(partitions))
	return nil
}

func (l *logListener) OnRevoked(_ context.Context, partitions []TopicPartition) error {
	l.log.V(l.v).Info("Revoked partitions", "partitions", partitionNames(partitions))
	return nil
}

func partitionNames(ps []TopicPartition) []string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Topic + "/" + strconv.Itoa(int(p.Partition))
	}
	return names
}
