//go:build !linux

package stream

// closeWatcher is epoll's (closewatch_linux.go); elsewhere every stream keeps a reader goroutine.
type closeWatcher struct{}

func watcher() *closeWatcher { return nil }

func (*closeWatcher) watch(*Conn) (uint64, bool) { return 0, false }

func (*closeWatcher) forget(uint64) {}
