package output

import (
	"fmt"
	"unicode/utf8"
)

// FillSpans completes a document's rows from its joined text, the text
// its byte offsets index: it widens a byte range that starts or ends
// inside a character to the whole character (a byte-level tokenizer can
// split one, as byte-fallback BPE does with emoji), sets the code point
// offsets and, when withText, the chunk's text, text[ByteStart:ByteEnd].
// Rows in chunk order cost one pass over the text. A range outside the
// text is an error: the rows are not this text's.
func FillSpans(text string, rows EmbedRows, withText bool) error {
	var start, end cpCursor
	for i := range rows {
		r := &rows[i]
		if r.ByteStart < 0 || r.ByteStart > r.ByteEnd || int(r.ByteEnd) > len(text) {
			return fmt.Errorf("%s chunk %d: bytes [%d, %d) outside a text of %d bytes", r.ID, r.Chunk, r.ByteStart, r.ByteEnd, len(text))
		}
		r.ByteStart = int32(runeStart(text, int(r.ByteStart)))
		r.ByteEnd = int32(runeEnd(text, int(r.ByteEnd)))
		r.CPStart = start.at(text, int(r.ByteStart))
		r.CPEnd = end.at(text, int(r.ByteEnd))
		if withText {
			r.Text = text[r.ByteStart:r.ByteEnd]
		} else {
			r.Text = ""
		}
	}
	return nil
}

// runeStart is i, or the start of the character that byte i is inside.
func runeStart(s string, i int) int {
	for i > 0 && i < len(s) && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}

// runeEnd is i, or the end of the character that byte i is inside.
func runeEnd(s string, i int) int {
	for i > 0 && i < len(s) && !utf8.RuneStart(s[i]) {
		i++
	}
	return i
}

// cpCursor counts the code points before a byte offset, walking forward
// from the offset it was last asked (from the start when asked an earlier one).
type cpCursor struct {
	pos int
	cp  int32
}

func (c *cpCursor) at(s string, i int) int32 {
	if i < c.pos {
		c.pos, c.cp = 0, 0
	}
	c.cp += int32(utf8.RuneCountInString(s[c.pos:i]))
	c.pos = i
	return c.cp
}
