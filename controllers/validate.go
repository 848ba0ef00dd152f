package controllers

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kafka-mirror/kafka-mirror-operator/api/v1alpha1"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/handler"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/topics"
)

// specError lists everything wrong with a spec, each problem starting with its field
// path (spec.topics.include[1]: ...). It is what the Stalled condition says.
type specError struct{ problems []string }

func (e *specError) Error() string { return strings.Join(e.problems, "; ") }

// validate renders m's engine config and checks it with the engine's own rules, so the
// operator accepts exactly what the engine will run: the config file's rules (regular
// expressions compile, rename is usable, durations positive, ...), then every handler
// and the rebalance listener are built (CEL compiled and type-checked, named handlers
// found in the registry, their args checked). Paths are rooted at spec. The API server
// has already rejected what its schema and CEL rules can see; this catches the rest.
//
// A mirror that runs its own image (spec.pod.image) may name handlers and listeners
// that only that image registers: those names are left to the engine, which checks them
// when it starts; everything else is still checked here.
func validate(m *v1alpha1.KafkaMirror) (*config.Config, error) {
	cfg := RenderConfig(m)
	var problems []string
	for _, e := range cfg.ValidateFields(field.NewPath("spec")) {
		problems = append(problems, e.Error())
	}
	customImage := m.Spec.Pod.Image != ""
	addHandlerProblems := func(err error) {
		for _, fe := range handler.FieldErrors(err) {
			if fe.Unregistered && customImage {
				continue
			}
			problems = append(problems, fe.Error())
		}
	}
	_, err := handler.NewChain(cfg.Handlers, handler.WithFieldPath("spec.handlers"))
	addHandlerProblems(err)
	_, err = handler.NewListener(cfg.RebalanceListener, handler.WithFieldPath("spec.rebalanceListener"))
	addHandlerProblems(err)
	if len(problems) == 0 {
		// The engine's topic selection has its own checks beyond compiling (the same
		// selector runs in the topic sync step and in the engine).
		if _, err := topics.NewSelector(cfg.Topics); err != nil {
			problems = append(problems, "spec."+err.Error())
		}
	}
	if len(problems) > 0 {
		return cfg, &specError{problems: problems}
	}
	return cfg, nil
}
