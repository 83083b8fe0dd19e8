// Package freeport hands out free TCP addresses on 127.0.0.1 for tests, benchmarks and the dev
// loop, to programs that bind them a moment later.
//
// A port is free when it is handed out, not when it is used: the kernel may give a just-released
// port to the next bind(0) again, so two addresses asked for one after the other can be the same
// (it happened to the conformance script: a sidecar and its upstream got one port). This package
// never hands out a port twice in one process.
package freeport

import (
	"errors"
	"net"
	"sync"
	"testing"
)

var (
	mu    sync.Mutex
	given = map[int]bool{} // ports handed out by this process, guarded by mu
)

// Addr returns "127.0.0.1:PORT" for a port that was free a moment ago and that this process has
// not handed out before.
func Addr() (string, error) {
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", err
		}
		addr := l.Addr().(*net.TCPAddr)
		_ = l.Close()
		mu.Lock()
		again := given[addr.Port]
		given[addr.Port] = true
		mu.Unlock()
		if !again {
			return addr.String(), nil
		}
	}
	return "", errors.New("freeport: the kernel keeps handing out ports already given out")
}

// ForTest is Addr for tests: it fails t instead of returning an error.
func ForTest(t testing.TB) string {
	t.Helper()
	a, err := Addr()
	if err != nil {
		t.Fatal(err)
	}
	return a
}
