//go:build linux

package stream

import (
	"errors"
	"os"
	"sync"
	"syscall"
)

// closeWatcher tells when the clients of hijacked connections go away, with one epoll instance
// and one goroutine for every stream of the process. The alternative, a goroutine blocked in
// Read per connection (hub.Watch), keeps at least 2 KB of stack per idle stream: more than a
// third of what an idle stream costs the sidecar (docs/performance.md).
//
// Each connection is registered once with EPOLLONESHOT: its first event (the client closed or
// reset it, or sent anything) disarms it, and closing the connection removes it from the epoll
// set. The set is keyed by a token, never by descriptor number: a closed connection's number
// may be another connection's a moment later.
type closeWatcher struct {
	epfd int
	file *os.File // epfd's, held for the process's life (its finalizer would close epfd)
	mu   sync.Mutex
	next uint64
	// conns are the watched connections by token (guarded by mu).
	conns map[uint64]*Conn
	dead  bool // epoll_wait failed for good: nothing more is watched (guarded by mu)
}

// watcher is the process's closeWatcher, started on first use; nil if epoll is not available.
// Its epoll descriptor is itself watched by Go's network poller (it is readable while events
// are ready): the goroutine that reads the events parks like any other network read, and no
// thread blocks in epoll_wait (a thread blocked in a system call holds the process's one P,
// --max-procs 1, until the runtime takes it back, up to milliseconds later).
var watcher = sync.OnceValue(func() *closeWatcher {
	fd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return nil
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		_ = syscall.Close(fd)
		return nil
	}
	f := os.NewFile(uintptr(fd), "closewatch-epoll")
	raw, err := f.SyscallConn()
	if err != nil {
		_ = f.Close()
		return nil
	}
	w := &closeWatcher{epfd: fd, file: f, conns: map[uint64]*Conn{}}
	go w.run(raw)
	return w
})

// closeEvents are what ends a stream: the client closed its side or reset the connection
// (EPOLLRDHUP, EPOLLHUP, EPOLLERR, the last two always reported) or sent anything (EPOLLIN:
// after its one request it has nothing more to say).
const closeEvents = syscall.EPOLLIN | syscall.EPOLLRDHUP | syscall.EPOLLONESHOT

// watch registers cw's connection: false when it cannot be (not a socket, or epoll refused it).
// Called with cw.life held.
func (w *closeWatcher) watch(cw *Conn) (uint64, bool) {
	sc, ok := cw.c.(syscall.Conn)
	if !ok {
		return 0, false
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	w.mu.Lock()
	if w.dead {
		w.mu.Unlock()
		return 0, false
	}
	w.next++
	tok := w.next
	w.conns[tok] = cw
	w.mu.Unlock()
	var addErr error
	ctlErr := raw.Control(func(fd uintptr) {
		ev := syscall.EpollEvent{Events: closeEvents, Fd: int32(uint32(tok)), Pad: int32(uint32(tok >> 32))}
		addErr = syscall.EpollCtl(w.epfd, syscall.EPOLL_CTL_ADD, int(fd), &ev)
	})
	if errors.Join(ctlErr, addErr) != nil {
		w.forget(tok)
		return 0, false
	}
	return tok, true
}

// forget drops a token: its connection is being closed (which takes it out of the epoll set).
func (w *closeWatcher) forget(tok uint64) {
	w.mu.Lock()
	delete(w.conns, tok)
	w.mu.Unlock()
}

func (w *closeWatcher) run(raw syscall.RawConn) {
	events := make([]syscall.EpollEvent, 128)
	for {
		var n int
		var waitErr error
		// Read calls the function again, once the descriptor is readable, while it returns false.
		err := raw.Read(func(fd uintptr) bool {
			n, waitErr = syscall.EpollWait(int(fd), events, 0)
			if errors.Is(waitErr, syscall.EINTR) {
				n, waitErr = 0, nil
			}
			return n > 0 || waitErr != nil
		})
		if err = errors.Join(err, waitErr); err != nil {
			// Not seen in practice. Streams registered so far end at their next failed write
			// (a keepalive at the latest); new ones get a reader goroutine (hub.Watch). epfd
			// stays open: a registration racing this one must not reach a reused descriptor.
			w.mu.Lock()
			w.dead = true
			w.mu.Unlock()
			return
		}
		for _, ev := range events[:n] {
			tok := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			w.mu.Lock()
			cw := w.conns[tok]
			delete(w.conns, tok)
			w.mu.Unlock()
			if cw != nil {
				cw.clientGone(tok)
			}
		}
	}
}
