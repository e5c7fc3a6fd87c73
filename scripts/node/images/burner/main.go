// Command burner is the test workload: it keeps CPUs busy and holds memory, so a test can measure what
// the node's cgroups let it have.
//
//	burner [-cpu N] [-memory BYTES] [-duration D]
//
// -cpu N spins N goroutines (GOMAXPROCS is raised to match); -memory allocates BYTES (suffixes Ki, Mi,
// Gi) and touches every page, so all of it is resident; -duration 0 (the default) runs until SIGTERM.
// It prints one line when the memory is resident.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func parseBytes(text string) (int64, error) {
	// Two-letter suffixes first: "Mi" must not be read as "M".
	units := []struct {
		suffix string
		factor int64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"K", 1e3}, {"M", 1e6}, {"G", 1e9}}
	for _, unit := range units {
		if number, ok := strings.CutSuffix(text, unit.suffix); ok {
			n, err := strconv.ParseInt(number, 10, 64)
			return n * unit.factor, err
		}
	}
	return strconv.ParseInt(text, 10, 64)
}

var sink uint64

func spin() {
	var x uint64 = 1
	for {
		for i := 0; i < 1<<20; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
		sink = x
	}
}

func main() {
	cpus := flag.Int("cpu", 0, "goroutines that spin")
	memory := flag.String("memory", "0", "bytes to allocate and keep resident (Ki, Mi, Gi)")
	duration := flag.Duration("duration", 0, "run time (0: until SIGTERM)")
	flag.Parse()
	size, err := parseBytes(*memory)
	if err != nil || size < 0 || *cpus < 0 {
		fmt.Fprintf(os.Stderr, "burner: bad -memory %q or -cpu %d\n", *memory, *cpus)
		os.Exit(2)
	}
	if *cpus > runtime.GOMAXPROCS(0) {
		runtime.GOMAXPROCS(*cpus)
	}
	held := make([]byte, size)
	for i := 0; i < len(held); i += 4096 {
		held[i] = 1
	}
	fmt.Printf("burner: %d cpu, %d bytes resident\n", *cpus, size)
	for i := 0; i < *cpus; i++ {
		go spin()
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	if *duration > 0 {
		select {
		case <-stop:
		case <-time.After(*duration):
		}
	} else {
		<-stop
	}
	runtime.KeepAlive(held)
}
