// Package hubtest holds a stream transport for the tests of the hub and of
// the rooms above it.
package hubtest

import "bytes"

// Recorder is a stream transport (hub.FrameWriter) that keeps what a
// stream writes.
type Recorder struct {
	Events [][]byte
	Ended  bool
	Final  []byte
}

// WriteEvent keeps ev.
func (w *Recorder) WriteEvent(ev []byte, scratch []byte) ([]byte, error) {
	w.Events = append(w.Events, bytes.Clone(ev))
	return scratch, nil
}

// End keeps final and that the stream ended.
func (w *Recorder) End(final []byte) { w.Ended, w.Final = true, bytes.Clone(final) }
