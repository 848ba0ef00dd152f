// Package cli is the kafka-mirror command line of the mirror engine: `run`, `validate`,
// `version` and the logging flags they share. It is a package rather than part of
// package main so that a team can build its own image: a main that registers its own
// handlers (handler.Register) and then calls Main gets the same CLI, flags and behaviour
// as the stock binary, with its handlers in the registry that `run` and `validate` use.
//
// The package imports the engine and nothing of the operator: the stock binary adds the
// operator's `manager` and `demo` subcommands and the KafkaMirror renderer of `validate
// -f` (WithManifestRenderer) in its own main.
package cli
