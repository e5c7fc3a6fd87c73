// Command kube-controller-manager is upstream's cmd/kube-controller-manager,
// built from the pinned k8s.io/kubernetes release in ../go.mod. Integration
// tests run it for the PersistentVolume controller (claim binding).
package main

import (
	"os"
	_ "time/tzdata" // for CronJob time zones

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	command := app.NewControllerManagerCommand()
	code := cli.Run(command)
	os.Exit(code)
}
