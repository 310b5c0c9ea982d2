// Package hubtest is a fake Hugging Face Hub for tests, run in the test
// process: prepared directories served on 127.0.0.1 the way the Hub's model
// API (GET /api/models/ID/revision/REV?blobs=true) and resolve endpoint (GET
// /ID/resolve/COMMIT/PATH, with Range) serve a repository, large files
// redirected to a second server standing for the Hub's CDN, gated
// repositories, and faults a download must survive or refuse: a connection
// cut part way through a file, a wrong announced checksum.
package hubtest

import (
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Request is one request either server received.
type Request struct {
	Server        string // "hub" or "cdn"
	Path          string
	Range         string // the Range header
	Authorization string // the Authorization header
}

// Drop cuts the connection serving a file after After bytes of the body,
// Times times (-1: every time); with Hang it stops sending there instead,
// until the client gives up on the request.
type Drop struct {
	After int64
	Times int
	Hang  bool
}

// Server is a fake Hub and its CDN.
type Server struct {
	URL string // the endpoint ($HF_ENDPOINT)
	CDN string // where LFS files are redirected

	mu       sync.Mutex
	repos    map[string]*repo
	blobs    map[string]file // by sha256, what the CDN serves
	requests []Request
	drops    map[string]*Drop // by file name
	wrong    map[string]bool  // "ID/NAME" of files announced with a wrong sha256
}

type repo struct {
	token   string            // gated: "Bearer "+token required
	echo    int               // not 0: every request is answered with this status, echoing its Authorization header
	commits map[string][]file // by commit
	refs    map[string]string // branch → commit
}

type file struct {
	name   string
	data   []byte
	blobID string // git blob sha1
	sha256 string
	lfs    bool
}

// New starts the two servers on 127.0.0.1; they stop when the test ends.
func New(t testing.TB) *Server {
	s := &Server{repos: map[string]*repo{}, blobs: map[string]file{}, drops: map[string]*Drop{}, wrong: map[string]bool{}}
	hub := httptest.NewServer(http.HandlerFunc(s.serveHub))
	cdn := httptest.NewServer(http.HandlerFunc(s.serveCDN))
	t.Cleanup(hub.Close)
	t.Cleanup(cdn.Close)
	s.URL, s.CDN = hub.URL, cdn.URL
	return s
}

// Add serves the files of dir as a commit of repository id and points the
// branches refs at it; it returns the commit (40 hex digits, from the
// files' contents). Files ending in .onnx, .safetensors or .bin are LFS
// files, redirected to the CDN.
func (s *Server) Add(t testing.TB, id, dir string, refs ...string) string {
	t.Helper()
	var files []file
	h := sha1.New()
	err := filepath.WalkDir(dir, func(p string, de fs.DirEntry, err error) error {
		if err != nil || de.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		f := file{name: filepath.ToSlash(rel), data: b}
		bh := sha1.New()
		fmt.Fprintf(bh, "blob %d\x00", len(b))
		bh.Write(b)
		f.blobID = hex.EncodeToString(bh.Sum(nil))
		sum := sha256.Sum256(b)
		f.sha256 = hex.EncodeToString(sum[:])
		for _, ext := range []string{".onnx", ".safetensors", ".bin"} {
			f.lfs = f.lfs || strings.HasSuffix(f.name, ext)
		}
		fmt.Fprintf(h, "%s %s\n", f.name, f.blobID)
		files = append(files, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(h, "repository %s\n", id)
	commit := hex.EncodeToString(h.Sum(nil))
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.repos[id]
	if r == nil {
		r = &repo{commits: map[string][]file{}, refs: map[string]string{}}
		s.repos[id] = r
	}
	r.commits[commit] = files
	for _, ref := range refs {
		r.refs[ref] = commit
	}
	for _, f := range files {
		if f.lfs {
			s.blobs[f.sha256] = f
		}
	}
	return commit
}

// Gate makes repository id need the bearer token (a gated model).
func (s *Server) Gate(id, token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repos[id].token = token
}

// Echo makes every request for repository id fail with status code, its
// error body and X-Error-Message header echoing the request's
// Authorization header, as a careless proxy or server might.
func (s *Server) Echo(id string, code int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repos[id].echo = code
}

// DropFile cuts the downloads of the file name (of any repository) as d
// says.
func (s *Server) DropFile(name string, d Drop) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.drops[name] = &d
}

// WrongChecksum makes the API announce a wrong sha256 for the file name
// of repository id.
func (s *Server) WrongChecksum(id, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wrong[id+"/"+name] = true
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func (s *Server) record(server string, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, Request{Server: server, Path: r.URL.Path, Range: r.Header.Get("Range"), Authorization: r.Header.Get("Authorization")})
}

func (s *Server) serveHub(w http.ResponseWriter, r *http.Request) {
	s.record("hub", r)
	if rest, ok := strings.CutPrefix(r.URL.Path, "/api/models/"); ok {
		s.serveAPI(w, r, rest)
		return
	}
	id, rest, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/resolve/")
	commit, name, _ := strings.Cut(rest, "/")
	_, files, ok := s.lookup(w, r, id, commit, ok)
	if !ok {
		return
	}
	for _, f := range files {
		if f.name != name {
			continue
		}
		if f.lfs {
			http.Redirect(w, r, s.CDN+"/blobs/"+f.sha256+"?expires=soon", http.StatusFound)
			return
		}
		s.serveFile(w, r, f)
		return
	}
	httpError(w, http.StatusNotFound, "EntryNotFound", fmt.Sprintf("%s does not exist in %s@%s", name, id, commit))
}

// lookup finds the repository id at the commit or branch rev, answering
// 404 or 401 itself when it cannot.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request, id, rev string, ok bool) (*repo, []file, bool) {
	s.mu.Lock()
	rp := s.repos[id]
	s.mu.Unlock()
	if !ok || rp == nil {
		httpError(w, http.StatusNotFound, "RepoNotFound", "Repository not found")
		return nil, nil, false
	}
	if rp.echo != 0 {
		msg := "request refused; you sent Authorization: " + r.Header.Get("Authorization")
		w.Header().Set("X-Error-Message", msg)
		httpError(w, rp.echo, "Echo", msg)
		return nil, nil, false
	}
	if rp.token != "" && r.Header.Get("Authorization") != "Bearer "+rp.token {
		httpError(w, http.StatusUnauthorized, "GatedRepo", "Access to model "+id+" is restricted. You must have access to it and be authenticated to access it.")
		return nil, nil, false
	}
	if c, ok := rp.refs[rev]; ok {
		rev = c
	}
	files, ok := rp.commits[rev]
	if !ok {
		httpError(w, http.StatusNotFound, "RevisionNotFound", "Invalid rev id: "+rev)
		return nil, nil, false
	}
	return rp, files, true
}

func httpError(w http.ResponseWriter, code int, kind, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Error-Code", kind)
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// serveAPI answers GET /api/models/ID/revision/REV[?blobs=true].
func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request, rest string) {
	id, rev, ok := strings.Cut(rest, "/revision/")
	_, files, ok := s.lookup(w, r, id, rev, ok)
	if !ok {
		return
	}
	s.mu.Lock()
	commit := rev
	if c, ok := s.repos[id].refs[rev]; ok {
		commit = c
	}
	s.mu.Unlock()
	type lfs struct {
		SHA256      string `json:"sha256"`
		Size        int    `json:"size"`
		PointerSize int    `json:"pointerSize"`
	}
	type sibling struct {
		Name   string `json:"rfilename"`
		BlobID string `json:"blobId,omitempty"`
		Size   *int   `json:"size,omitempty"`
		LFS    *lfs   `json:"lfs,omitempty"`
	}
	blobs := r.URL.Query().Get("blobs") == "true"
	var sib []sibling
	for _, f := range files {
		sb := sibling{Name: f.name}
		if blobs {
			n := len(f.data)
			sb.BlobID, sb.Size = f.blobID, &n
			if f.lfs {
				sum := f.sha256
				if s.wrongChecksum(id + "/" + f.name) {
					sum = strings.Repeat("0", 64)
				}
				sb.LFS = &lfs{SHA256: sum, Size: n, PointerSize: 134}
			}
		}
		sib = append(sib, sb)
	}
	sort.Slice(sib, func(i, j int) bool { return sib[i].Name < sib[j].Name })
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"_id": "x", "id": id, "modelId": id, "sha": commit, "private": false, "siblings": sib})
}

func (s *Server) wrongChecksum(name string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.wrong[name]
}

func (s *Server) serveCDN(w http.ResponseWriter, r *http.Request) {
	s.record("cdn", r)
	s.mu.Lock()
	f, ok := s.blobs[strings.TrimPrefix(r.URL.Path, "/blobs/")]
	s.mu.Unlock()
	if !ok {
		http.NotFound(w, r)
		return
	}
	s.serveFile(w, r, f)
}

// serveFile sends f, or the part of it a "bytes=N-" Range asks for,
// cutting the connection where a Drop says.
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request, f file) {
	body, start := f.data, 0
	if rg := r.Header.Get("Range"); rg != "" {
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(rg, "bytes="), "-"))
		if err != nil || n < 0 || n >= len(f.data) {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", len(f.data)))
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		body, start = f.data[n:], n
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", n, len(f.data)-1, len(f.data)))
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Header().Set("ETag", `"`+f.blobID+`"`)
	w.Header().Set("Accept-Ranges", "bytes")
	if start > 0 {
		w.WriteHeader(http.StatusPartialContent)
	}
	if d, ok := s.takeDrop(f.name); ok && d.After < int64(len(body)) {
		w.Write(body[:d.After])
		w.(http.Flusher).Flush()
		if d.Hang {
			<-r.Context().Done() // the client cut the connection
		}
		panic(http.ErrAbortHandler) // the connection closes short of Content-Length
	}
	w.Write(body)
}

// takeDrop reports whether this download of name is to be cut, and how.
func (s *Server) takeDrop(name string) (Drop, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.drops[name]
	if d == nil || d.Times == 0 {
		return Drop{}, false
	}
	if d.Times > 0 {
		d.Times--
	}
	return *d, true
}
