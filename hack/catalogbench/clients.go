package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"
)

// audience is the benchmark's clients, wherever they run: in this process (-client-procs 0)
// or in child processes of this program.
type audience interface {
	len() int
	// wait waits, at most notifyWait, for every stream to hear notification i (from 0), and
	// returns when each stream heard it; an error unless every stream heard exactly i+1.
	wait(i int) ([]time.Time, error)
	close()
}

// wait implements audience for the clients of this process.
func (l *listeners) wait(i int) ([]time.Time, error) {
	select {
	case <-l.expect(i + 1):
	case <-time.After(notifyWait):
	}
	return l.heardNth(i)
}

// The protocol between the benchmark and a clients process, one JSON value per line: the
// child says how many streams it opened, then answers each heardRequest with a heardReply.
type (
	openedReply struct {
		Opened int    `json:"opened"`
		Error  string `json:"error,omitempty"`
	}
	heardRequest struct {
		Heard int `json:"heard"`
	}
	heardReply struct {
		At    []int64 `json:"at"` // Unix nanoseconds: the child's clock is the machine's
		Error string  `json:"error,omitempty"`
	}
)

// childFlag runs this program as a clients process (see runChild).
const childFlag = "-clients-child"

// clientProcs are listeners in child processes of this program, so that the clients' reads
// and garbage collection are not the same Go runtime's as the controllers and watches this
// process holds (a real client is not in the operator's process). They share the machine's
// cores all the same.
type clientProcs struct {
	procs []*clientProc
	n     int
}

type clientProc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *json.Decoder
	n   int
}

// startClientProcs opens n streams to url in procs child processes, n/procs each.
func startClientProcs(url string, n, procs int, reader string) (*clientProcs, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	c := &clientProcs{}
	for k := range procs {
		m := n / procs
		if k < n%procs {
			m++
		}
		cmd := exec.Command(self, childFlag, url, strconv.Itoa(m), reader)
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			c.close()
			return nil, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			c.close()
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			c.close()
			return nil, err
		}
		c.procs = append(c.procs, &clientProc{cmd: cmd, in: in, out: json.NewDecoder(bufio.NewReader(out)), n: m})
	}
	errs := make([]error, len(c.procs))
	var wg sync.WaitGroup
	for k, p := range c.procs {
		wg.Go(func() {
			var r openedReply
			switch err := p.out.Decode(&r); {
			case err != nil:
				errs[k] = fmt.Errorf("clients process %d: %w", k, err)
			case r.Error != "":
				errs[k] = fmt.Errorf("clients process %d: %s", k, r.Error)
			case r.Opened != p.n:
				errs[k] = fmt.Errorf("clients process %d opened %d streams, want %d", k, r.Opened, p.n)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		c.close()
		return nil, err
	}
	c.n = n
	return c, nil
}

func (c *clientProcs) len() int { return c.n }

func (c *clientProcs) wait(i int) ([]time.Time, error) {
	replies := make([]heardReply, len(c.procs))
	errs := make([]error, len(c.procs))
	var wg sync.WaitGroup
	for k, p := range c.procs {
		wg.Go(func() {
			if err := json.NewEncoder(p.in).Encode(heardRequest{Heard: i}); err != nil {
				errs[k] = err
				return
			}
			if err := p.out.Decode(&replies[k]); err != nil {
				errs[k] = err
				return
			}
			if replies[k].Error != "" {
				errs[k] = errors.New(replies[k].Error)
			}
		})
	}
	wg.Wait()
	out := make([]time.Time, 0, c.n)
	for k, r := range replies {
		if errs[k] != nil {
			return nil, fmt.Errorf("clients process %d: %w", k, errs[k])
		}
		for _, ns := range r.At {
			out = append(out, time.Unix(0, ns))
		}
	}
	return out, nil
}

// close ends every child (closing its stdin closes its streams and makes it exit).
func (c *clientProcs) close() {
	for _, p := range c.procs {
		p.in.Close()
		done := make(chan struct{})
		go func() {
			_ = p.cmd.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-done
		}
	}
}

// runChild is a clients process: it opens n streams to url, says how many, and answers the
// benchmark's heardRequests on stdin until stdin closes.
func runChild(url string, n int, reader string) error {
	ls, err := openStreams(context.Background(), url, n, reader)
	defer ls.close()
	enc := json.NewEncoder(os.Stdout)
	r := openedReply{Opened: ls.len()}
	if err != nil {
		r.Error = err.Error()
	}
	if encErr := enc.Encode(r); encErr != nil || err != nil {
		return errors.Join(encErr, err)
	}
	dec := json.NewDecoder(bufio.NewReader(os.Stdin))
	for {
		var req heardRequest
		if err := dec.Decode(&req); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		at, err := ls.wait(req.Heard)
		var rep heardReply
		if err != nil {
			rep.Error = err.Error()
		}
		for _, t := range at {
			rep.At = append(rep.At, t.UnixNano())
		}
		if err := enc.Encode(rep); err != nil {
			return err
		}
	}
}
