// Package hub holds the Hugging Face hub's local cache layout and a client
// for its resolve endpoint; it runs in the module. It resolves hub ids
// (ORG/NAME[@REVISION]) to snapshot directories already on disk (Snapshot,
// in the Hugging Face cache or in the model cache's pulled models) and
// fetches the files a load needs into the model cache (Pull).
//
// The cache layout, the Hugging Face hub's and the one Pull writes:
//
//	models--ORG--NAME/refs/REVISION           the commit (40 hex digits) a branch or tag named
//	models--ORG--NAME/snapshots/COMMIT/PATH   a file of the repository at that commit: in the
//	                                          Hugging Face cache a symbolic link to ../../blobs/…;
//	                                          in the model cache the file itself
//	models--ORG--NAME/blobs/…                 the Hugging Face cache's file contents
//	models--ORG--NAME/partial/COMMIT/PATH     Pull's downloads in progress (PATH.part), kept
//	                                          so that the next pull resumes them
package hub

import (
	"errors"
	"fmt"
	"strings"
)

// DefaultEndpoint is the Hub's public endpoint; $HF_ENDPOINT replaces it.
const DefaultEndpoint = "https://huggingface.co"

// DefaultRevision is the revision an id without @REVISION names.
const DefaultRevision = "main"

// Errors a caller tells apart; running again unchanged mends none of them.
var (
	// ErrBadRef marks a string that is not a hub id.
	ErrBadRef = errors.New("not a Hugging Face hub id")
	// ErrNotCached marks an id whose revision no cache holds.
	ErrNotCached = errors.New("not in the cache")
	// ErrUnsafeLink marks a snapshot file that links outside its
	// repository's folder, or to nothing.
	ErrUnsafeLink = errors.New("snapshot link refused")
	// ErrBadRepo marks a repository file synapse cannot use as it is: a
	// modules.json that is not JSON, or names a module outside the
	// repository. The same commit gives the same file on every pull.
	ErrBadRepo = errors.New("a repository file synapse cannot use")
)

// Ref is a hub id and the revision asked for.
type Ref struct {
	ID       string // "ORG/NAME" or "NAME"
	Revision string // a branch, tag or commit; "" for DefaultRevision
}

// Rev is the revision, DefaultRevision when none was given.
func (r Ref) Rev() string {
	if r.Revision == "" {
		return DefaultRevision
	}
	return r.Revision
}

func (r Ref) String() string {
	if r.Revision == "" {
		return r.ID
	}
	return r.ID + "@" + r.Revision
}

// Folder is the repository's folder name in a cache: models--ORG--NAME.
func (r Ref) Folder() string { return "models--" + strings.ReplaceAll(r.ID, "/", "--") }

// ParseRef reads ORG/NAME or NAME, optionally followed by @REVISION. The
// names follow the Hub's rules: letters, digits, '_', '.' and '-', starting
// and ending with a letter, digit or '_', no "--" or "..", at most 96
// characters each. A revision is a branch, tag or commit: no spaces, no
// ".." component, no leading or trailing '/'.
func ParseRef(s string) (Ref, error) {
	id, rev, hasRev := strings.Cut(s, "@")
	if hasRev && rev == "" {
		return Ref{}, fmt.Errorf("%q: %w: nothing after '@' (want ID@REVISION)", s, ErrBadRef)
	}
	parts := strings.Split(id, "/")
	if len(parts) > 2 {
		return Ref{}, fmt.Errorf("%q: %w: want ORG/NAME or NAME", s, ErrBadRef)
	}
	for _, p := range parts {
		if err := checkName(p); err != nil {
			return Ref{}, fmt.Errorf("%q: %w: %s", s, ErrBadRef, err)
		}
	}
	if hasRev {
		if err := checkRevision(rev); err != nil {
			return Ref{}, fmt.Errorf("%q: %w: revision %s", s, ErrBadRef, err)
		}
	}
	return Ref{ID: id, Revision: rev}, nil
}

func checkName(p string) error {
	word := func(c byte) bool {
		return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	switch {
	case p == "":
		return errors.New("empty name")
	case len(p) > 96:
		return fmt.Errorf("name %.20q… is longer than 96 characters", p)
	case !word(p[0]) || !word(p[len(p)-1]):
		return fmt.Errorf("name %q must start and end with a letter, digit or '_'", p)
	case strings.Contains(p, "--") || strings.Contains(p, ".."):
		return fmt.Errorf("name %q must not contain \"--\" or \"..\"", p)
	}
	for i := 0; i < len(p); i++ {
		if c := p[i]; !word(c) && c != '-' && c != '.' {
			return fmt.Errorf("name %q: %q is not a letter, digit, '_', '.' or '-'", p, c)
		}
	}
	return nil
}

func checkRevision(rev string) error {
	if strings.HasPrefix(rev, "/") || strings.HasSuffix(rev, "/") {
		return fmt.Errorf("%q must not start or end with '/'", rev)
	}
	for _, part := range strings.Split(rev, "/") {
		if part == "" || part == "." || part == ".." {
			return fmt.Errorf("%q has an empty, '.' or '..' component", rev)
		}
	}
	for _, r := range rev {
		if r <= ' ' || r == 0x7f || r == '\\' {
			return fmt.Errorf("%q: no spaces, control characters or backslashes", rev)
		}
	}
	return nil
}

// IsCommit reports a full commit id: 40 lower-case hex digits.
func IsCommit(rev string) bool {
	if len(rev) != 40 {
		return false
	}
	return strings.Trim(rev, "0123456789abcdef") == ""
}
