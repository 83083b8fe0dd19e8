package stdio

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// child is one run of the stdio MCP server process. Its stdin is written by
// whoever holds wmu; its stdout and stderr each have one reading goroutine.
type child struct {
	gen  uint64
	cmd  *exec.Cmd
	log  *slog.Logger
	wmu  sync.Mutex // guards stdin writes and closing
	in   *os.File   // write end of the child's stdin (nil once closed)
	out  *os.File   // read end of the child's stdout
	exit chan struct{}
	// err is the process's exit error; read it only after exit is closed.
	err error
}

// startChild starts argv[0] with argv[1:] in its own process group (so that
// signals reach what a wrapper such as npx starts) with pipes on stdin and
// stdout, and stderr copied to stderrTo line by line.
func startChild(gen uint64, argv []string, stderrTo io.Writer, maxStderrLine int, log *slog.Logger) (*child, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		_ = inR.Close()
		_ = inW.Close()
		return nil, err
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		for _, f := range []*os.File{inR, inW, outR, outW} {
			_ = f.Close()
		}
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if err := cmd.Start(); err != nil {
		for _, f := range []*os.File{inR, inW, outR, outW, errR, errW} {
			_ = f.Close()
		}
		return nil, fmt.Errorf("starting %s: %w", argv[0], err)
	}
	// The child holds its own copies of these ends.
	_ = inR.Close()
	_ = outW.Close()
	_ = errW.Close()
	c := &child{gen: gen, cmd: cmd, log: log, in: inW, out: outR, exit: make(chan struct{})}
	stderrDone := make(chan struct{})
	go func() {
		defer close(stderrDone)
		copyStderr(errR, stderrTo, maxStderrLine)
		_ = errR.Close()
	}()
	go func() {
		err := cmd.Wait()
		// Its last words reach the log before anyone learns of the exit (a
		// grandchild that keeps stderr open does not hold the exit up).
		waitFor(stderrDone, 2*time.Second)
		c.err = err
		c.wmu.Lock()
		if c.in != nil {
			_ = c.in.Close()
			c.in = nil
		}
		c.wmu.Unlock()
		close(c.exit)
	}()
	return c, nil
}

// errStdinClosed: the child's stdin is closed (it exited, or the bridge drains).
var errStdinClosed = errors.New("the MCP server's stdin is closed")

// write sends one message and its newline. A child that stops reading its
// stdin for stdinWriteTimeout fails the write rather than blocking callers forever.
func (c *child) write(msg []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.in == nil {
		return errStdinClosed
	}
	_ = c.in.SetWriteDeadline(time.Now().Add(stdinWriteTimeout))
	buf := make([]byte, 0, len(msg)+1)
	buf = append(append(buf, msg...), '\n')
	_, err := c.in.Write(buf)
	return err
}

// closeStdin closes the child's stdin: the stdio transport's "please exit".
func (c *child) closeStdin() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.in != nil {
		_ = c.in.Close()
		c.in = nil
	}
}

// signal sends sig to the child's process group.
func (c *child) signal(sig syscall.Signal) {
	if c.cmd.Process != nil {
		_ = syscall.Kill(-c.cmd.Process.Pid, sig)
	}
}

// exited reports whether the process has exited.
func (c *child) exited() bool {
	select {
	case <-c.exit:
		return true
	default:
		return false
	}
}

// stop ends the child the way the stdio transport asks: close stdin, wait,
// SIGTERM, wait, SIGKILL. It returns once the process has exited.
func (c *child) stop(stdinGrace, termGrace time.Duration) {
	c.closeStdin()
	if waitFor(c.exit, stdinGrace) {
		return
	}
	c.log.Info("MCP server did not exit after stdin closed; sending SIGTERM", "grace", stdinGrace)
	c.signal(syscall.SIGTERM)
	if waitFor(c.exit, termGrace) {
		return
	}
	c.log.Warn("MCP server did not exit after SIGTERM; sending SIGKILL", "grace", termGrace)
	c.signal(syscall.SIGKILL)
	<-c.exit
}

func waitFor(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// copyStderr copies the child's stderr to w line by line, each line cut at
// max bytes (with a note of how much was cut), so that a child writing one
// endless line costs bounded memory.
func copyStderr(r io.Reader, w io.Writer, max int) {
	lr := newLineReader(r, max)
	for {
		line, n, err := lr.next()
		switch {
		case errors.Is(err, errLineTooLong):
			_, _ = fmt.Fprintf(w, "%s… [line of %d bytes cut at %d]\n", line, n, len(line))
		case err != nil:
			return
		default:
			_, _ = w.Write(append(line, '\n'))
		}
	}
}
