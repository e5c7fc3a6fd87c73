// Package upstream runs kube-scheduler's own scheduler_perf harness
// (k8s.io/kubernetes/test/integration/scheduler_perf, pinned in go.mod) on
// performance-config.yaml, so bench/upstream_compare.py can put upstream's
// SchedulingThroughput next to pykoord's in the same run.
package upstream

import (
	"fmt"
	"os"
	"testing"

	_ "k8s.io/component-base/logs/json/register"
	perf "k8s.io/kubernetes/test/integration/scheduler_perf"
)

func TestMain(m *testing.M) {
	if err := perf.InitTests(); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		os.Exit(1)
	}
	m.Run()
}

// BenchmarkPerfScheduling is upstream's entry point with no out-of-tree
// plugins; "pykoord" is the topic name that prefixes the DataItems file.
func BenchmarkPerfScheduling(b *testing.B) {
	perf.RunBenchmarkPerfScheduling(b, "performance-config.yaml", "pykoord", nil)
}
