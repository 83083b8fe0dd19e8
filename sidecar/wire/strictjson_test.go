package wire

import (
	"testing"
	"unicode"
	"unicode/utf8"
)

// TestFoldEqualMatchesEveryDecoderFold: a non-ASCII rune matches an ASCII
// letter exactly when Unicode simple folding, ToUpper, ToLower, ToTitle or
// their compositions map one to the other (the four runes U+017F, U+212A,
// U+0130, U+0131), so the check refuses whatever a case-insensitive decoder
// would match to a member the sidecar reads.
func TestFoldEqualMatchesEveryDecoderFold(t *testing.T) {
	var letterClass [26]rune
	for c := range letterClass {
		letterClass[c] = foldClass(rune('a' + c))
	}
	n := 0
	for r := rune(0x80); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		cands := []rune{unicode.ToUpper(unicode.ToLower(r)), unicode.ToLower(unicode.ToUpper(r)),
			unicode.ToLower(r), unicode.ToUpper(r), unicode.ToTitle(r)}
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			cands = append(cands, f)
		}
		var want byte
		for _, c := range cands {
			if c < 0x80 {
				want = byte(unicode.ToLower(c))
				break
			}
		}
		// FoldEqual compares non-ASCII runes by foldClass.
		var got byte
		fc := foldClass(r)
		for c := byte('a'); c <= 'z'; c++ {
			if letterClass[c-'a'] == fc {
				got = c
			}
		}
		if got != want {
			t.Errorf("%U %q folds to %q, want %q", r, r, got, want)
		}
		if want != 0 && !FoldEqual([]byte("x"+string(r)), "x"+string(want)) {
			t.Errorf("FoldEqual(%q, %q) = false", "x"+string(r), "x"+string(want))
		}
		if want != 0 {
			n++
		}
	}
	if n != 4 {
		t.Errorf("%d non-ASCII runes fold to ASCII letters, want 4 (U+017F, U+212A, U+0130, U+0131)", n)
	}
	for _, c := range []struct {
		key, name string
		want      bool
	}{
		{"\u212Aind", "kind", true}, {"KIND", "kind", true}, {"paramſ", "params", true},
		{"Ärger", "ärger", true}, {"ärger", "ärger", true}, {"name", "names", false}, {"names", "name", false},
		{"n\u00e4me", "name", false}, {"_meta", "_META", true}, {"-meta", "_meta", false},
	} {
		if got := FoldEqual([]byte(c.key), c.name); got != c.want {
			t.Errorf("FoldEqual(%q, %q) = %v, want %v", c.key, c.name, got, c.want)
		}
	}
}
