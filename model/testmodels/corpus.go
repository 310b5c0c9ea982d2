package testmodels

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"unicode"

	"github.com/synapse-embed/synapse/model/gguf/modelgen"
)

// commonWords are the words of the texts tests write by hand ("hello
// world", "a short one") and the demo's words; Words puts them first.
var commonWords = append([]string{
	"hello", "world", "goodbye", "first", "second", "third", "short", "long", "one", "two", "three",
	"end", "title", "abc", "def", "what", "who", "where", "when", "sky", "blue", "yes", "answer",
	"question", "quick", "brown", "fox", "jumps", "over", "lazy", "dog",
}, modelgen.DemoWords...)

// pseudoWords is how many generated words Words adds: enough for a
// vocabulary of about 1,900 tokens, with word ids above 1,000.
const pseudoWords = 1500

var (
	wordsOnce sync.Once
	words     []string
)

// Words is the word list of the generated test vocabulary: commonWords,
// then pseudoWords made-up words ("kalo", "mirutes"), deterministic and
// distinct. Every word of Corpus is among them.
func Words() []string {
	wordsOnce.Do(func() {
		seen := map[string]bool{}
		for _, w := range commonWords {
			if !seen[w] {
				seen[w] = true
				words = append(words, w)
			}
		}
		rng := rand.New(rand.NewPCG(1, 2))
		const consonants, vowels = "bdfgklmnprstvz", "aeiou"
		for n := 0; n < pseudoWords; {
			var b strings.Builder
			for range 1 + rng.IntN(3) {
				b.WriteByte(consonants[rng.IntN(len(consonants))])
				b.WriteByte(vowels[rng.IntN(len(vowels))])
			}
			if rng.IntN(3) == 0 {
				b.WriteByte(consonants[rng.IntN(len(consonants))])
			}
			if w := b.String(); !seen[w] {
				seen[w] = true
				words = append(words, w)
				n++
			}
		}
	})
	return words
}

// Vocab is the generated WordPiece vocabulary of Words (BERT's special
// tokens at their usual ids: [CLS] 101, [SEP] 102).
func Vocab() modelgen.Vocab { return modelgen.WordPieceVocab(Words()) }

// Doc is one generated document, with SciFact's fields.
type Doc struct {
	ID, Title, Text string
}

// Map is the document as a JSON object: _id, title, text.
func (d Doc) Map() map[string]any {
	return map[string]any{"_id": d.ID, "title": d.Title, "text": d.Text}
}

// Corpus returns n deterministic documents shaped like SciFact's: a title
// of 5 to 15 words, a text of 1 to 25 sentences of 5 to 20 words (up to
// about 500 tokens), with commas, numbers and capitals. Words are drawn
// with a skew, so that some are frequent and others appear in one document
// only. The first documents are the same whatever n is.
func Corpus(n int) []Doc {
	ws := Words()
	rng := rand.New(rand.NewPCG(3, 4))
	pick := func() string {
		u := rng.Float64()
		return ws[int(u*u*u*float64(len(ws)))]
	}
	docs := make([]Doc, n)
	for i := range docs {
		docs[i] = Doc{ID: fmt.Sprint(4000 + 37*i), Title: sentence(rng, pick, 5+rng.IntN(11), false)}
		var b strings.Builder
		for s := range 1 + rng.IntN(25) {
			if s > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(sentence(rng, pick, 5+rng.IntN(16), true))
		}
		docs[i].Text = b.String()
	}
	return docs
}

// sentence is k words, capitalized, with an occasional comma or number,
// and a full stop if stop.
func sentence(rng *rand.Rand, pick func() string, k int, stop bool) string {
	var b strings.Builder
	for i := range k {
		w := pick()
		switch {
		case i == 0:
			w = capitalize(w)
		case rng.IntN(12) == 0:
			w = fmt.Sprint(rng.IntN(2000))
		}
		if i > 0 {
			if rng.IntN(10) == 0 {
				b.WriteByte(',')
			}
			b.WriteByte(' ')
		}
		b.WriteString(w)
	}
	if stop {
		b.WriteByte('.')
	}
	return b.String()
}

func capitalize(w string) string {
	r := []rune(w)
	r[0] = unicode.ToUpper(r[0])
	return string(r)
}
