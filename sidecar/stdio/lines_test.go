package stdio

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestLineReader(t *testing.T) {
	long := strings.Repeat("z", 300)
	lr := newLineReader(strings.NewReader("a\r\n"+long+"\nb\n"+long+"\ntail"), 100)
	type got struct {
		line string
		n    int64
		err  error
	}
	want := []got{{"a", 3, nil}, {long[:100], 300, errLineTooLong}, {"b", 2, nil}, {long[:100], 300, errLineTooLong}, {"tail", 4, nil}, {"", 0, io.EOF}}
	for i, w := range want {
		line, n, err := lr.next()
		if errors.Is(w.err, errLineTooLong) { // the kept prefix is keepPrefix or the line, whichever is shorter
			if !errors.Is(err, errLineTooLong) || n != w.n || !strings.HasPrefix(long, string(line)) {
				t.Errorf("%d: %q %d %v, want an over-long line of %d", i, line, n, err, w.n)
			}
			continue
		}
		if string(line) != w.line || !errors.Is(err, w.err) || (w.err == nil && n != w.n) {
			t.Errorf("%d: %q %d %v, want %q %d %v", i, line, n, err, w.line, w.n, w.err)
		}
	}
}

func TestShapeOf(t *testing.T) {
	for _, tc := range []struct {
		prefix       string
		id           string
		method, resp bool
	}{
		{`{"jsonrpc":"2.0","id":12,"result":{"content":[{"text":"xxxxx`, "12", false, true},
		{`{"result":{"content":[{"text":"xxxxx`, "", false, true},
		{`{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"xx`, "", true, false},
		{`not json`, "", false, false},
	} {
		s := shapeOf([]byte(tc.prefix))
		if string(s.id) != tc.id || s.hasMethod != tc.method || s.isResponse != tc.resp {
			t.Errorf("%s: %+v", tc.prefix, s)
		}
	}
}
