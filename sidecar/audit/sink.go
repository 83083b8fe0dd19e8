package audit

import (
	"bufio"
	"io"
	"sync"
	"sync/atomic"
)

// DefaultQueue is how many records may wait for the writer before new ones are dropped.
const DefaultQueue = 4096

// Sink hands records to an output from its own goroutine: Emit never waits for the output.
// When the queue is full (the output is slow or stuck), records are dropped and counted; the
// next record written carries the count (Record.DroppedBefore). Records the output loses
// (a failed export) are counted the same way.
//
// The writer goroutine owns the output; the queue is the only hand-off.
type Sink struct {
	q       chan *Record
	out     output
	cur     Record // the record being written (the writer goroutine's)
	onDrop  func()
	dropped atomic.Uint64 // since the last record written
	mu      sync.RWMutex  // guards closed against a send on the closed queue
	closed  bool
	done    chan struct{}
	err     error // the first write error; read after done
}

// output is where a Sink's goroutine writes records.
type output interface {
	// write writes r (or buffers it); r is the sink's, reused for the next record.
	write(r *Record) error
	// flush writes what is buffered, when no record waits; it returns how many buffered
	// records were lost.
	flush() (lost int, err error)
}

// NewSink starts a sink writing JSON lines to w with a queue of queue records (DefaultQueue when
// queue <= 0). onDrop, when not nil, is called once per dropped record (a metric).
func NewSink(w io.Writer, queue int, onDrop func()) *Sink {
	return newSink(&jsonLines{out: bufio.NewWriterSize(w, 64<<10)}, queue, onDrop)
}

func newSink(out output, queue int, onDrop func()) *Sink {
	if queue <= 0 {
		queue = DefaultQueue
	}
	s := &Sink{q: make(chan *Record, queue), out: out, onDrop: onDrop, done: make(chan struct{})}
	go s.run()
	return s
}

// Emit queues r for writing, or drops it when the queue is full or the sink closed. It never
// blocks. r must not be changed after; it may be emitted to several sinks.
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
	s.drop(1)
}

func (s *Sink) drop(n int) {
	s.dropped.Add(uint64(n))
	if s.onDrop != nil {
		for range n {
			s.onDrop()
		}
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

// write writes the sink's copy of r: other sinks may hold the same record.
func (s *Sink) write(r *Record) {
	s.cur = *r
	if s.cur.Schema == "" {
		s.cur.Schema = Schema
	}
	s.cur.DroppedBefore += s.dropped.Swap(0)
	if err := s.out.write(&s.cur); err != nil && s.err == nil {
		s.err = err
	}
}

func (s *Sink) flush() {
	lost, err := s.out.flush()
	if lost > 0 {
		s.drop(lost)
	}
	if err != nil && s.err == nil {
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
	if c, ok := s.out.(interface{ close() error }); ok {
		if err := c.close(); err != nil && s.err == nil {
			s.err = err
		}
	}
	return s.err
}

// jsonLines writes records as JSON lines (AppendJSON).
type jsonLines struct {
	out  *bufio.Writer
	line []byte // the record being written, reused
}

func (j *jsonLines) write(r *Record) error {
	j.line = AppendJSON(j.line[:0], r)
	_, err := j.out.Write(j.line)
	return err
}

func (j *jsonLines) flush() (int, error) { return 0, j.out.Flush() }
