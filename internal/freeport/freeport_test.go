package freeport

import (
	"net"
	"testing"
)

// Every address is bindable and none repeats, even though each port is released before the next
// one is asked for.
func TestAddrNeverRepeats(t *testing.T) {
	seen := map[string]bool{}
	for range 2000 {
		a := ForTest(t)
		if seen[a] {
			t.Fatalf("%s handed out twice", a)
		}
		seen[a] = true
	}
	l, err := net.Listen("tcp", ForTest(t))
	if err != nil {
		t.Fatalf("a handed-out address cannot be bound: %v", err)
	}
	_ = l.Close()
}
