// apiserver-cost-go: the client-go reference client of bench/apiserver_cost.py.
//
// Posts, for every pod named in PODS_FILE ("name uid" lines, namespace apiserver-cost), its v1.Binding
// and then its events.k8s.io/v1 Scheduled Event, CONCURRENCY (default 64) pairs in flight, with client-go as kube-scheduler
// configures it (protobuf bodies, one HTTP/2 connection, the kubeconfig's client certificate, rate
// limits lifted). Prints one JSON line: pairs, wall, client_cpu, server_cpu (the CPU-seconds of the
// pids given, read from /proc, over the same window). APISERVER_COST_HTTP1=1: HTTP/1.1 (ALPN http/1.1 only),
// client-go's keep-alive pool, instead of HTTP/2.
//
//	apiserver-cost-go KUBECONFIG PODS_FILE PID[,PID...] [CONCURRENCY]
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const namespace = "apiserver-cost"

func procCPU(pid string) float64 {
	data, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		panic(err)
	}
	text := string(data)
	fields := strings.Fields(text[strings.LastIndex(text, ")")+1:])
	user, _ := strconv.ParseFloat(fields[11], 64)
	sys, _ := strconv.ParseFloat(fields[12], 64)
	return (user + sys) / 100.0 // CLK_TCK is 100 on Linux
}

func serverCPU(pids []string) float64 {
	total := 0.0
	for _, p := range pids {
		total += procCPU(p)
	}
	return total
}

func selfCPU() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func main() {
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Args[1])
	if err != nil {
		panic(err)
	}
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.QPS = 100000
	if os.Getenv("APISERVER_COST_HTTP1") == "1" {
		cfg.TLSClientConfig.NextProtos = []string{"http/1.1"} // client-go's HTTP/1.1 pool instead of HTTP/2
	}
	cfg.Burst = 100000
	client := kubernetes.NewForConfigOrDie(cfg)
	pids := strings.Split(os.Args[3], ",")
	type pod struct{ name, uid string }
	var pods []pod
	f, err := os.Open(os.Args[2])
	if err != nil {
		panic(err)
	}
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		parts := strings.Fields(scanner.Text())
		if len(parts) == 2 {
			pods = append(pods, pod{parts[0], parts[1]})
		}
	}
	ctx := context.Background()
	host, _ := os.Hostname()
	var wg sync.WaitGroup
	for i := 0; i < 64; i++ { // warm-up: the connection is open before the window
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := client.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{}); err != nil {
				panic(err)
			}
		}()
	}
	wg.Wait()
	concurrency := 64
	if len(os.Args) > 4 {
		concurrency, _ = strconv.Atoi(os.Args[4])
	}
	work := make(chan int)
	server0, client0, t0 := serverCPU(pids), selfCPU(), time.Now()
	for w := 0; w < concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				p := pods[i]
				node := fmt.Sprintf("node-%d", i%1000)
				binding := &corev1.Binding{
					ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: namespace, UID: types.UID(p.uid)},
					Target:     corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node},
				}
				if err := client.CoreV1().Pods(namespace).Bind(ctx, binding, metav1.CreateOptions{}); err != nil {
					panic(err)
				}
				now := time.Now()
				event := &eventsv1.Event{
					ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", p.name, now.UnixNano()), Namespace: namespace},
					EventTime:           metav1.NewMicroTime(now),
					ReportingController: "default-scheduler",
					ReportingInstance:   "default-scheduler-" + host,
					Action:              "Binding",
					Reason:              "Scheduled",
					Type:                "Normal",
					Note:                fmt.Sprintf("Successfully assigned %s/%s to %s", namespace, p.name, node),
					Regarding:           corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.name, Namespace: namespace, UID: types.UID(p.uid)},
				}
				if _, err := client.EventsV1().Events(namespace).Create(ctx, event, metav1.CreateOptions{}); err != nil {
					panic(err)
				}
			}
		}()
	}
	for i := range pods {
		work <- i
	}
	close(work)
	wg.Wait()
	wall := time.Since(t0).Seconds()
	out, _ := json.Marshal(map[string]any{
		"pairs": len(pods), "wall": wall, "client_cpu": selfCPU() - client0, "server_cpu": serverCPU(pids) - server0,
	})
	fmt.Println(string(out))
}
