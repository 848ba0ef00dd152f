package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"

	"github.com/kafka-mirror/kafka-mirror-operator/mirror"
	"github.com/kafka-mirror/kafka-mirror-operator/mirror/config"
)

// profiledEngineCommand is the hidden first argument with which the benchmark re-runs
// itself as a profiled engine process. The engine serves no pprof endpoint, and
// profiling it inside the benchmark would mix it with the kfake clusters; a child
// process of its own profiles the engine alone.
const profiledEngineCommand = "profiled-engine"

// profileResult names the profiles of the profiled run and their tops.
type profileResult struct {
	Records      int    `json:"records"`
	Filter       string `json:"filter,omitempty"`
	CPUProfile   string `json:"cpuProfile"`
	AllocProfile string `json:"allocProfile"`
	HeapProfile  string `json:"heapProfile"`
	MutexProfile string `json:"mutexProfile"`
	CPUTop       string `json:"cpuTop,omitempty"`
	AllocTop     string `json:"allocTop,omitempty"`
	HeapTop      string `json:"heapTop,omitempty"`
	MutexTop     string `json:"mutexTop,omitempty"`
	// ForwarderCPUProfile is a CPU profile of the bare forwarder over the same records,
	// and the breakdowns split both CPU profiles by goroutine (cpuBreakdown).
	ForwarderCPUProfile string        `json:"forwarderCpuProfile,omitempty"`
	EngineBreakdown     *cpuBreakdown `json:"engineBreakdown,omitempty"`
	ForwarderBreakdown  *cpuBreakdown `json:"forwarderBreakdown,omitempty"`
}

// runProfiledEngine is the child side: the engine as `kafka-mirror run` starts it, with
// a CPU profile over its whole run, an allocation profile written when it stops, and a
// heap (in-use) profile written whenever it receives SIGUSR1.
//
//	bench profiled-engine --cpu F --allocs F --heap F run --config FILE [--log-... X]
func runProfiledEngine(args []string) error {
	fs := flag.NewFlagSet(profiledEngineCommand, flag.ContinueOnError)
	cpuPath := fs.String("cpu", "", "CPU profile output")
	allocPath := fs.String("allocs", "", "allocation profile output")
	heapPath := fs.String("heap", "", "in-use heap profile output, written on SIGUSR1")
	mutexPath := fs.String("mutex", "", "mutex contention profile output")
	if err := fs.Parse(args); err != nil {
		return err
	}
	run := flag.NewFlagSet("run", flag.ContinueOnError)
	cfgPath := run.String("config", "", "the MirrorConfig file")
	run.String("log-format", "", "ignored: the profiled engine does not log")
	run.String("log-level", "", "ignored: the profiled engine does not log")
	if rest := fs.Args(); len(rest) == 0 || rest[0] != "run" {
		return errors.New("expected `run --config FILE` after the profile flags")
	} else if err := run.Parse(rest[1:]); err != nil {
		return err
	}
	cfg, err := config.Load(*cfgPath)
	if err != nil {
		return err
	}
	e, err := mirror.New(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	go func() {
		for range usr1 {
			_ = writeProfile("heap", *heapPath, 0)
			logMemory("half-way")
		}
	}()
	cpu, err := os.Create(*cpuPath)
	if err != nil {
		return fmt.Errorf("while creating the CPU profile: %w", err)
	}
	// One contention event in 10 is enough to find a hot lock and costs little.
	runtime.SetMutexProfileFraction(10)
	if err := pprof.StartCPUProfile(cpu); err != nil {
		return fmt.Errorf("while starting the CPU profile: %w", err)
	}
	runErr := e.Run(ctx)
	pprof.StopCPUProfile()
	if err := cpu.Close(); err != nil {
		return fmt.Errorf("while writing the CPU profile: %w", err)
	}
	if err := writeProfile("allocs", *allocPath, 0); err != nil {
		return err
	}
	if err := writeProfile("mutex", *mutexPath, 0); err != nil {
		return err
	}
	logMemory("stopped")
	return runErr
}

// logMemory writes the Go runtime's view of memory and the kernel's resident set to
// stderr (the engine log), so that a peak RSS far above the heap can be explained.
func logMemory(when string) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	status, _ := os.ReadFile("/proc/self/status")
	var rss []string
	for _, l := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(l, "VmRSS") || strings.HasPrefix(l, "VmHWM") || strings.HasPrefix(l, "RssAnon") || strings.HasPrefix(l, "RssFile") {
			rss = append(rss, strings.Join(strings.Fields(l), " "))
		}
	}
	fmt.Fprintf(os.Stderr, "memory %s: heapAlloc %d MiB, heapInuse %d MiB, heapSys %d MiB, heapReleased %d MiB, stackSys %d MiB, sys %d MiB, numGC %d; %s\n",
		when, ms.HeapAlloc>>20, ms.HeapInuse>>20, ms.HeapSys>>20, ms.HeapReleased>>20, ms.StackSys>>20, ms.Sys>>20, ms.NumGC, strings.Join(rss, ", "))
}

func writeProfile(name, path string, debug int) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("while creating the %s profile: %w", name, err)
	}
	if name == "heap" {
		runtime.GC() // an up-to-date in-use picture
	}
	if err := pprof.Lookup(name).WriteTo(f, debug); err != nil {
		f.Close()
		return fmt.Errorf("while writing the %s profile: %w", name, err)
	}
	return f.Close()
}

// profiledRun mirrors --records records once with the engine profiled, writes the
// profiles next to the results (docs/benchmarks/*.prof, not committed) and keeps the
// top of each for the report: CPU, allocations, mutex contention, and an in-use heap
// taken half-way, when the engine is in its steady state.
func (b *bench) profiledRun(ctx context.Context) (profileResult, error) {
	self, err := os.Executable()
	if err != nil {
		return profileResult{}, fmt.Errorf("while locating the benchmark binary: %w", err)
	}
	if err := os.MkdirAll(b.o.out, 0o755); err != nil {
		return profileResult{}, fmt.Errorf("while creating %s: %w", b.o.out, err)
	}
	res := profileResult{
		Records:      b.o.records,
		CPUProfile:   filepath.Join(b.o.out, "engine-cpu.prof"),
		AllocProfile: filepath.Join(b.o.out, "engine-allocs.prof"),
		HeapProfile:  filepath.Join(b.o.out, "engine-heap.prof"),
		MutexProfile: filepath.Join(b.o.out, "engine-mutex.prof"),
	}
	bin := []string{self, profiledEngineCommand, "--cpu", res.CPUProfile, "--allocs", res.AllocProfile,
		"--heap", res.HeapProfile, "--mutex", res.MutexProfile}
	spec := engineSpec{name: "profiled", noDataLoss: true, streams: b.o.streams, maxInFlight: b.o.maxInFlight, partial: b.o.bigRecords > b.o.records}
	if b.o.profileFilter {
		spec.filter = celFilter
		res.Filter = celFilter
	}
	if _, err := b.engineRun(ctx, spec, bin, b.o.records, syscall.SIGUSR1); err != nil {
		return res, err
	}
	// The forwarder over the same records, profiled the same way, for the breakdown.
	res.ForwarderCPUProfile = filepath.Join(b.o.out, "forwarder-cpu.prof")
	fspec := engineSpec{name: "profiled-forwarder", noDataLoss: true, streams: b.o.streams, maxInFlight: b.o.maxInFlight, partial: spec.partial}
	if _, err := b.engineRun(ctx, fspec, []string{self, forwarderCommand, "--cpu", res.ForwarderCPUProfile}, b.o.records, 0); err != nil {
		return res, err
	}
	if eb, err := readBreakdown(ctx, res.CPUProfile); err == nil {
		res.EngineBreakdown = &eb
	} else {
		b.logf("  (no engine CPU breakdown: %v)", err)
	}
	if fb, err := readBreakdown(ctx, res.ForwarderCPUProfile); err == nil {
		res.ForwarderBreakdown = &fb
	} else {
		b.logf("  (no forwarder CPU breakdown: %v)", err)
	}
	res.CPUTop = pprofTop(ctx, res.CPUProfile)
	res.AllocTop = pprofTop(ctx, res.AllocProfile, "-sample_index=alloc_space")
	res.HeapTop = pprofTop(ctx, res.HeapProfile, "-sample_index=inuse_space")
	res.MutexTop = pprofTop(ctx, res.MutexProfile, "-sample_index=delay")
	return res, nil
}

// pprofTop is `go tool pprof -top` of a profile, the first lines only.
func pprofTop(ctx context.Context, path string, flags ...string) string {
	args := append([]string{"tool", "pprof", "-top", "-nodecount=20"}, flags...)
	out, err := exec.CommandContext(ctx, "go", append(args, path)...).Output()
	if err != nil {
		return fmt.Sprintf("(go tool pprof failed: %v)", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	// Drop the file and build lines; keep the totals and the table.
	for i, l := range lines {
		if strings.HasPrefix(l, "Showing") || strings.HasPrefix(l, "Duration") {
			lines = lines[i:]
			break
		}
	}
	return strings.Join(lines, "\n")
}
