package framework

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync"
)

// Recorded is one request an upstream received: its JSON-RPC method ("" for a GET or an
// unreadable body) and its headers.
type Recorded struct {
	Method string
	Header http.Header
}

// Recorder records the requests a handler receives, in order. mu guards seen.
type Recorder struct {
	mu   sync.Mutex
	seen []Recorded
}

// Wrap records every request before h serves it.
func (r *Recorder) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rec := Recorded{Header: req.Header.Clone()}
		if req.Method == http.MethodPost {
			body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
			if err == nil {
				var m struct {
					Method string `json:"method"`
				}
				_ = json.Unmarshal(body, &m)
				rec.Method = m.Method
			}
			req.Body = io.NopCloser(bytes.NewReader(body))
		}
		r.mu.Lock()
		r.seen = append(r.seen, rec)
		r.mu.Unlock()
		h.ServeHTTP(w, req)
	})
}

// Mark is the position of the next request to be recorded.
func (r *Recorder) Mark() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

// Since returns the requests recorded from mark on with the given JSON-RPC method (every
// request when method is "").
func (r *Recorder) Since(mark int, method string) []Recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Recorded
	for _, rec := range r.seen[min(mark, len(r.seen)):] {
		if method == "" || rec.Method == method {
			out = append(out, rec)
		}
	}
	return out
}
