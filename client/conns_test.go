package client_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/client"
)

// A server ends an SSE answer in a write of its own after the response event (a server that
// flushes each event; the end follows when its handler returns). The client reads that end
// after returning the result, so its connection is kept: without it, Go's transport discards
// the connection and every read opens a new one (20 of 20). The server here holds each
// tools/list stream's end back 2 ms, so that the client always has the answer before the end.
func TestReadsKeepConnections(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "s", Version: "v1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "t"}, func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	var mu sync.Mutex
	readConns := map[string]bool{} // client addresses that carried tools/list
	sse := 0
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(flushEach{w}, r)
		if bytes.Contains(body, []byte(`"tools/list"`)) {
			mu.Lock()
			readConns[r.RemoteAddr] = true
			if w.Header().Get("Content-Type") == "text/event-stream" {
				sse++
			}
			mu.Unlock()
			time.Sleep(2 * time.Millisecond) // the stream's end is written when this returns
		}
	}))
	t.Cleanup(ts.Close) // after the client's Close (cleanups run last first)
	c := connect(t, ts.URL, nil)
	const reads = 20 // the server's tools carry no ttlMs: every read goes to it
	for range reads {
		if _, _, err := c.ListTools(tctx(t)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond) // the stream's end has come and the connection is idle again
	}
	mu.Lock()
	defer mu.Unlock()
	if sse != reads {
		t.Fatalf("%d of %d reads were SSE streams from the server; the test needs each read to be one", sse, reads)
	}
	// One connection when nothing is late; a busy machine may delay a stream's end past the
	// next read now and then.
	if len(readConns) > reads/4 {
		t.Errorf("%d reads came on %d connections; want at most %d (connections kept)", reads, len(readConns), reads/4)
	}
}

// flushEach sends every write at once, as a server that flushes each event does.
type flushEach struct{ http.ResponseWriter }

func (f flushEach) Write(b []byte) (int, error) {
	n, err := f.ResponseWriter.Write(b)
	http.NewResponseController(f.ResponseWriter).Flush()
	return n, err
}

func (f flushEach) Unwrap() http.ResponseWriter { return f.ResponseWriter }

// A request whose context ends while the server has not answered fails with the context's
// own error: the request runs on a context of its own (so that finishBody can outlive the
// caller's), which must end with the caller's cause. server/discover at Connect is such a
// request on the caller's context (cached reads run on the client's own).
func TestRequestEndsWithItsContext(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // (a read body lets the server see the client leave)
		<-r.Context().Done()               // no answer until the client gives up
	}))
	t.Cleanup(ts.Close)
	ctx, cancel := context.WithTimeout(tctx(t), 100*time.Millisecond)
	defer cancel()
	if _, err := client.Connect(ctx, ts.URL, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Connect past its deadline: %v; want context.DeadlineExceeded", err)
	}
	ctx, cancel = context.WithCancel(tctx(t))
	time.AfterFunc(100*time.Millisecond, cancel)
	if _, err := client.Connect(ctx, ts.URL, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("Connect cancelled: %v; want context.Canceled", err)
	}
}
