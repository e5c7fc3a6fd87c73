// Command etcd is upstream's server/main.go, built from the pinned
// go.etcd.io/etcd/server/v3 release in go.mod.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
