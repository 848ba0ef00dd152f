package main

import (
	"context"
	"errors"
)

// profiledEngineCommand is the hidden first argument with which the benchmark re-runs
// itself as a profiled engine process.
const profiledEngineCommand = "profiled-engine"

// profileResult names the profiles of the profiled run and their tops.
type profileResult struct {
	Records      int    `json:"records"`
	CPUProfile   string `json:"cpuProfile"`
	AllocProfile string `json:"allocProfile"`
	CPUTop       string `json:"cpuTop,omitempty"`
	AllocTop     string `json:"allocTop,omitempty"`
}

func runProfiledEngine([]string) error {
	return errors.New("the profiled engine needs the mirror engine, which has not landed yet")
}

func (b *bench) profiledRun(context.Context) (profileResult, error) {
	return profileResult{}, errors.New("--profile needs the mirror engine, which has not landed yet")
}
