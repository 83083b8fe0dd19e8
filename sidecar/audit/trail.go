package audit

import (
	"cmp"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/switchboard-mcp/switchboard/internal/catalog"
)

// TrailOptions configure a Trail.
type TrailOptions struct {
	// Out is where records go when the Audit names no file and no OTLP endpoint, or its file
	// cannot be used (os.Stdout when nil).
	Out io.Writer
	// Queue is the number of records waiting per sink (DefaultQueue when 0).
	Queue int
	// Pod names the pod in the records and in the OTLP resource.
	Pod string
	// Dir is the directory an audit file must be in (catalog.AuditDir when empty).
	Dir string
	Log *slog.Logger
	// OnDrop is called for each record a full sink drops (may be nil).
	OnDrop func()
}

// Trail keeps the sinks and the redactor of the catalog's Audit (docs/audit.md). The state is
// swapped whole when the catalog's Audit changes (a new catalog revision), under mu; requests
// read it with one atomic load.
type Trail struct {
	out    io.Writer
	queue  int
	pod    string
	dir    string
	log    *slog.Logger
	onDrop func()

	cur    atomic.Pointer[State]
	mu     sync.Mutex // guards swaps of cur, and stdout
	stdout *Sink      // created with the first stdout state, closed by Close
	// closing counts the files being closed in the background, which Close waits for.
	closing sync.WaitGroup
}

// State is one catalog Audit, compiled: its redactor and its sinks.
type State struct {
	cfg  *catalog.Audit // the catalog's, compared by pointer
	red  *Redactor
	sink *Sink // JSON lines: the file's or stdout's; nil when records go over OTLP only
	// file is the open audit file (nil: sink is the stdout sink); the state that opened it
	// hands it on to the next state with the same path, and the last one closes it.
	file *os.File
	// otlp exports records to cfg.OTLPEndpoint; handed on like file.
	otlp *Sink
}

// Config is the catalog's Audit the state was compiled from.
func (st *State) Config() *catalog.Audit { return st.cfg }

// Redactor is the redactor of the Audit's arguments mode and paths.
func (st *State) Redactor() *Redactor { return st.red }

// Sinks are the state's JSON lines sink (the file's or stdout's) and its OTLP sink, each nil
// when unused.
func (st *State) Sinks() (lines, otlp *Sink) { return st.sink, st.otlp }

// Emit hands r to the state's sinks; it never waits.
func (st *State) Emit(r *Record) {
	if st.sink != nil {
		st.sink.Emit(r)
	}
	if st.otlp != nil {
		st.otlp.Emit(r)
	}
}

// NewTrail returns a Trail with no Audit yet.
func NewTrail(o TrailOptions) *Trail {
	if o.Out == nil {
		o.Out = os.Stdout
	}
	return &Trail{out: o.Out, queue: o.Queue, pod: o.Pod, dir: o.Dir, log: o.Log, onDrop: o.OnDrop}
}

// Pod is the pod the records name.
func (a *Trail) Pod() string { return a.pod }

// Current is the state in use (nil: auditing off).
func (a *Trail) Current() *State { return a.cur.Load() }

// State is the compiled state of cfg, the live catalog's Audit: nil when it has none.
func (a *Trail) State(cfg *catalog.Audit) *State {
	st := a.cur.Load()
	if st == nil && cfg == nil {
		return nil
	}
	if st != nil && st.cfg == cfg {
		return st
	}
	return a.swap(cfg)
}

// swap makes cfg's state the current one, reusing the sink when the destination is the same,
// and closes the previous file sink otherwise (in the background: Close writes what is queued).
// A record emitted to a sink being closed is dropped and counted.
func (a *Trail) swap(cfg *catalog.Audit) *State {
	a.mu.Lock()
	defer a.mu.Unlock()
	old := a.cur.Load()
	if (old == nil && cfg == nil) || (old != nil && old.cfg == cfg) {
		return old
	}
	var next *State
	if cfg != nil {
		red, err := NewRedactor(Mode(cfg.Arguments), cfg.Redact, 0)
		if err != nil {
			// Decode validated the paths; should the redactor still refuse them, no argument is kept.
			a.log.Error("Audit arguments cannot be redacted as configured; records keep no arguments", "err", err)
			red, _ = NewRedactor(ModeOff, nil, 0)
		}
		next = &State{cfg: cfg, red: red}
		a.openFile(old, next)
		a.openOTLP(old, next)
		if next.sink == nil && next.otlp == nil {
			next.sink = a.stdoutSink()
		}
		a.log.Info("Auditing requests", "methods", cfg.Methods, "denials", cfg.Denials, "arguments", cfg.Arguments,
			"file", cfg.File, "otlpEndpoint", cfg.OTLPEndpoint)
	} else {
		a.log.Info("Auditing off")
	}
	a.cur.Store(next)
	if old != nil && old.file != nil && (next == nil || next.file != old.file) {
		a.closing.Go(func() { closeAuditFile(a.log, old) })
	}
	if old != nil && old.otlp != nil && (next == nil || next.otlp != old.otlp) {
		a.closing.Go(func() { closeOTLP(a.log, old.otlp) })
	}
	return next
}

// openFile gives next the file sink its Audit names: old's when the path is the same, else
// a newly opened file. A file outside the audit directory is refused, and one that cannot be
// opened is left out: either way the records go to stdout (openOTLP aside), said in the log.
func (a *Trail) openFile(old, next *State) {
	file := next.cfg.File
	switch {
	case file == "":
		return
	case old != nil && old.file != nil && old.file.Name() == file:
		next.sink, next.file = old.sink, old.file
		return
	case !InDir(cmp.Or(a.dir, catalog.AuditDir), file):
		a.log.Error("Refusing an audit file outside the audit directory; audit records go to stdout", "file", file,
			"dir", cmp.Or(a.dir, catalog.AuditDir))
	default:
		f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			a.log.Error("Opening the audit file failed; audit records go to stdout", "file", file, "err", err)
			break
		}
		next.sink, next.file = NewSink(f, a.queue, a.onDrop), f
		return
	}
	next.sink = a.stdoutSink()
}

// stdoutSink is the one sink of stdout, started with its first use; a.mu is held.
func (a *Trail) stdoutSink() *Sink {
	if a.stdout == nil {
		a.stdout = NewSink(a.out, a.queue, a.onDrop)
	}
	return a.stdout
}

// InDir reports whether the clean, absolute path file lies below dir (an audit file must lie
// below the audit directory).
func InDir(dir, file string) bool {
	rel, err := filepath.Rel(dir, file)
	return err == nil && filepath.IsAbs(file) && filepath.Clean(file) == file && rel != "." && rel != ".." &&
		!strings.HasPrefix(rel, "../")
}

// openOTLP gives next the OTLP sink its Audit names: old's when the endpoint is the same.
func (a *Trail) openOTLP(old, next *State) {
	ep := next.cfg.OTLPEndpoint
	switch {
	case ep == "":
	case old != nil && old.otlp != nil && old.cfg.OTLPEndpoint == ep:
		next.otlp = old.otlp
	default:
		s, err := NewOTLPSink(ep, a.pod, a.queue, a.onDrop)
		if err != nil {
			a.log.Error("Starting the audit OTLP export failed", "otlpEndpoint", ep, "err", err)
			return
		}
		next.otlp = s
	}
}

func closeOTLP(log *slog.Logger, s *Sink) {
	if err := s.Close(); err != nil {
		log.Error("Exporting audit records over OTLP failed", "err", err)
	}
}

func closeAuditFile(log *slog.Logger, st *State) {
	err := st.sink.Close()
	if cerr := st.file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		log.Error("Writing the audit file failed", "file", st.file.Name(), "err", err)
	}
}

// Close writes what is queued and closes the sinks (at shutdown).
func (a *Trail) Close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	defer a.closing.Wait()
	st := a.cur.Swap(nil)
	if st != nil && st.file != nil {
		closeAuditFile(a.log, st)
	}
	if st != nil && st.otlp != nil {
		closeOTLP(a.log, st.otlp)
	}
	if a.stdout != nil {
		if err := a.stdout.Close(); err != nil {
			a.log.Error("Writing audit records to stdout failed", "err", err)
		}
	}
}
