// Command pause is the pod sandbox process of the real-node test cluster (hack/node): the
// container that holds a pod's namespaces. It sleeps, reaps children (with a shared process
// namespace it is PID 1 of the pod) and exits 0 on SIGTERM or SIGINT, like the upstream pause
// image, which cannot be pulled here.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
