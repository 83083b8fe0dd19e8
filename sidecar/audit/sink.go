package audit

import (
	"bufio"
	"io"
	"sync"
	"sync/atomic"
)

// DefaultQueue is how many records may wait for the writer before new ones are dropped.
const DefaultQueue = 4096

// Sink writes records as JSON lines, one per record, from its own goroutine: Emit never
// waits for the writer. When the queue is full (the writer is slow or stuck), records are
// dropped and counted; the next record written carries the count (Record.DroppedBefore).
//
// The writer goroutine owns the output; the queue is the only hand-off.
type Sink struct {
	q       chan *Record
	out     *bufio.Writer
	line    []byte // the record being written, reused
	onDrop  func()
	dropped atomic.Uint64 // since the last record written
	mu      sync.RWMutex  // guards closed against a send on the closed queue
	closed  bool
	done    chan struct{}
	err     error // the first write error; read after done
}

// NewSink starts a sink writing to w with a queue of queue records (DefaultQueue when
// queue <= 0). onDrop, when not nil, is called once per dropped record (a metric).
func NewSink(w io.Writer, queue int, onDrop func()) *Sink {
	if queue <= 0 {
		queue = DefaultQueue
	}
	s := &Sink{q: make(chan *Record, queue), out: bufio.NewWriterSize(w, 64<<10), onDrop: onDrop, done: make(chan struct{})}
	go s.run()
	return s
}

// Emit queues r for writing, or drops it when the queue is full or the sink closed. It never
// blocks. r must not be changed after.
func (s *Sink) Emit(r *Record) {
	s.mu.RLock()
	if !s.closed {
		select {
		case s.q <- r:
			s.mu.RUnlock()
			return
		default:
		}
	}
	s.mu.RUnlock()
	s.dropped.Add(1)
	if s.onDrop != nil {
		s.onDrop()
	}
}

// Dropped is how many records were dropped and not yet reported in a written record.
func (s *Sink) Dropped() uint64 { return s.dropped.Load() }

func (s *Sink) run() {
	defer close(s.done)
	for r := range s.q {
		s.write(r)
		if len(s.q) == 0 {
			s.flush()
		}
	}
	s.flush()
}

func (s *Sink) write(r *Record) {
	if r.Schema == "" {
		r.Schema = Schema
	}
	r.DroppedBefore += s.dropped.Swap(0)
	s.line = AppendJSON(s.line[:0], r)
	if _, err := s.out.Write(s.line); err != nil && s.err == nil {
		s.err = err
	}
}

func (s *Sink) flush() {
	if err := s.out.Flush(); err != nil && s.err == nil {
		s.err = err
	}
}

// Close writes what is queued and stops the sink; records emitted after are dropped. It
// returns the first write error.
func (s *Sink) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.q)
	}
	s.mu.Unlock()
	<-s.done
	return s.err
}
