package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/synapse-embed/synapse/io/readlimit"
)

// Errors of the Hub's answers that running again unchanged cannot mend.
var (
	// ErrAuth: the Hub refused access (401, 403): a gated or private
	// model, or a token without access.
	ErrAuth = errors.New("access refused")
	// ErrRemoteNotFound: no such model, revision or file (404).
	ErrRemoteNotFound = errors.New("not found on the Hub")
	// ErrProtocol: an answer that is not what the Hub's API sends.
	ErrProtocol = errors.New("unexpected answer")
)

// Client talks to a Hub endpoint: its model API and its resolve endpoint.
type Client struct {
	// Endpoint is the Hub's base URL ($HF_ENDPOINT, else DefaultEndpoint),
	// without a trailing slash.
	Endpoint string
	// Token is sent as a bearer token ($HF_TOKEN) to Endpoint's host only:
	// a redirect to another host drops it. It is never logged nor put in
	// an error.
	Token string
	// Attempts is how many times a request is tried before a transient
	// failure (a dropped connection, 429, 5xx) is returned; 0: 5.
	Attempts int
	// Backoff is the wait before attempt n+1 (n from 1); nil: 1s, 2s, 4s, …
	// up to 30s.
	Backoff func(n int) time.Duration
	// Stall is how long a request may wait for an answer, or a download
	// for its next byte, before its connection is cut (and the download
	// resumed); 0: one minute.
	Stall time.Duration
	// Log receives a line for each thing the client waits on.
	Log func(string)
	// Agent is the User-Agent header.
	Agent string

	http *http.Client
}

// NewClient returns a client of endpoint ("" : $HF_ENDPOINT, else
// DefaultEndpoint) with $HF_TOKEN; the endpoint must be an http or https
// URL with a host.
func NewClient(endpoint string) (*Client, error) {
	if endpoint == "" {
		endpoint = os.Getenv("HF_ENDPOINT")
	}
	if endpoint == "" {
		endpoint = DefaultEndpoint
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("endpoint %q (HF_ENDPOINT): want an http:// or https:// URL with a host and no query", endpoint)
	}
	c := &Client{Endpoint: strings.TrimRight(endpoint, "/"), Token: strings.TrimSpace(os.Getenv("HF_TOKEN"))}
	c.http = &http.Client{CheckRedirect: c.redirect}
	return c, nil
}

// redirect follows up to 10 redirects, to other hosts too, and drops the
// Authorization header once a hop leaves the endpoint's host (scheme, host
// and port): the Hub sends large files from a CDN that must not see the
// token. (net/http keeps it for another port of the same host.)
func (c *Client) redirect(req *http.Request, via []*http.Request) error {
	if len(via) >= 10 {
		return fmt.Errorf("more than 10 redirects")
	}
	base, _ := url.Parse(c.Endpoint)
	for _, r := range append(via, req) {
		if r.URL.Scheme != base.Scheme || r.URL.Host != base.Host {
			req.Header.Del("Authorization")
			break
		}
	}
	return nil
}

func (c *Client) attempts() int {
	if c.Attempts > 0 {
		return c.Attempts
	}
	return 5
}

func (c *Client) stall() time.Duration {
	if c.Stall > 0 {
		return c.Stall
	}
	return time.Minute
}

func (c *Client) backoff(n int) time.Duration {
	if c.Backoff != nil {
		return c.Backoff(n)
	}
	return min(time.Second<<min(n-1, 5), 30*time.Second)
}

func (c *Client) log(format string, args ...any) {
	if c.Log != nil {
		c.Log(fmt.Sprintf(format, args...))
	}
}

// wait sleeps before attempt n+1, or returns ctx's error.
func (c *Client) wait(ctx context.Context, n int) error {
	t := time.NewTimer(c.backoff(n))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// get sends a GET of u with the token (while on the endpoint's host) and
// the extra header lines.
func (c *Client) get(ctx context.Context, u string, header map[string]string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if c.Agent != "" {
		req.Header.Set("User-Agent", c.Agent)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	return c.http.Do(req)
}

// transientError is a failure another attempt may mend: a dropped or
// refused connection, 429, a 5xx answer.
type transientError struct{ err error }

func (e transientError) Error() string { return e.err.Error() }
func (e transientError) Unwrap() error { return e.err }

// statusError turns an answer that is not 2xx into an error saying what to
// do; one another attempt may mend is transientError.
func (c *Client) statusError(resp *http.Response, what string) error {
	msg := serverMessage(resp, c.Token)
	switch code := resp.StatusCode; {
	case code == http.StatusUnauthorized && c.Token == "":
		return fmt.Errorf("%s: %w (401%s): the model is gated or private, or does not exist; set HF_TOKEN to an access token of an account that may read it", what, ErrAuth, msg)
	case code == http.StatusUnauthorized:
		return fmt.Errorf("%s: %w (401%s): HF_TOKEN was not accepted (invalid or expired?)", what, ErrAuth, msg)
	case code == http.StatusForbidden:
		return fmt.Errorf("%s: %w (403%s): the account of HF_TOKEN may not read it; a gated model's conditions are accepted on its page", what, ErrAuth, msg)
	case code == http.StatusNotFound:
		return fmt.Errorf("%s: %w (404%s)", what, ErrRemoteNotFound, msg)
	case code == http.StatusTooManyRequests || code == http.StatusRequestTimeout || code >= 500:
		return transientError{fmt.Errorf("%s: the server answered %s%s", what, resp.Status, msg)}
	}
	return fmt.Errorf("%s: %w: %s%s", what, ErrProtocol, resp.Status, msg)
}

// serverMessage is the Hub's error text (its JSON "error", else the
// X-Error-Message header), as ": …", at most 200 bytes, with the token
// replaced by "[HF_TOKEN]" before it is cut (a server may echo the
// request's Authorization header back).
func serverMessage(resp *http.Response, token string) string {
	msg := resp.Header.Get("X-Error-Message")
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var body struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(b, &body) == nil && body.Error != "" {
		msg = body.Error
	}
	if token != "" {
		msg = strings.ReplaceAll(msg, token, "[HF_TOKEN]")
	}
	msg = strings.Join(strings.Fields(msg), " ")
	if msg == "" {
		return ""
	}
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	return ": " + msg
}

// Repo is a repository at one commit, as the model API describes it.
type Repo struct {
	ID       string `json:"id"`
	SHA      string `json:"sha"` // the commit the revision named
	Siblings []File `json:"siblings"`
}

// File is one file of a repository; Size and, for files kept in Git LFS,
// LFS.SHA256 are what a download is checked against; BlobID, the git blob
// id, checks the others.
type File struct {
	Name   string `json:"rfilename"`
	Size   int64  `json:"size"`
	BlobID string `json:"blobId"`
	LFS    *LFS   `json:"lfs,omitempty"`
}

// LFS is a Git LFS file's pointer.
type LFS struct {
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
}

// Info asks the model API for r's files at the commit its revision names
// now: GET {endpoint}/api/models/{id}/revision/{revision}?blobs=true.
func (c *Client) Info(ctx context.Context, r Ref) (Repo, error) {
	u := fmt.Sprintf("%s/api/models/%s/revision/%s?blobs=true", c.Endpoint, r.ID, url.PathEscape(r.Rev()))
	what := "model " + r.String()
	var repo Repo
	for n := 1; ; n++ {
		c.log("asking %s for the files of %s", c.Endpoint, r)
		err := c.info(ctx, u, what, &repo)
		var te transientError
		if !errors.As(err, &te) || n == c.attempts() || ctx.Err() != nil {
			if err == nil {
				err = checkRepo(repo, what)
			} else if errors.As(err, &te) && ctx.Err() == nil {
				err = fmt.Errorf("%w (after %d attempts)", err, n)
			}
			return repo, err
		}
		c.log("%v; trying again (attempt %d of %d)", err, n+1, c.attempts())
		if err := c.wait(ctx, n); err != nil {
			return repo, err
		}
	}
}

func (c *Client) info(ctx context.Context, u, what string, repo *Repo) error {
	actx, cancel := context.WithTimeoutCause(ctx, c.stall(), errStalled) // the file list is small
	defer cancel()
	resp, err := c.get(actx, u, nil)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(context.Cause(actx), errStalled) {
			return transientError{fmt.Errorf("%s: no answer from %s in %v", what, c.Endpoint, c.stall())}
		}
		if uerr := c.unresolved(what, err); uerr != nil {
			return uerr
		}
		return transientError{fmt.Errorf("%s: %w", what, err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return c.statusError(resp, what)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, readlimit.Config+1))
	if err != nil {
		return transientError{fmt.Errorf("%s: reading the file list: %w", what, err)}
	}
	if len(b) > readlimit.Config {
		return fmt.Errorf("%s: %w: the file list is over %d bytes", what, ErrProtocol, readlimit.Config)
	}
	if err := json.Unmarshal(b, repo); err != nil {
		return fmt.Errorf("%s: %w: the file list is not the API's JSON: %w", what, ErrProtocol, err)
	}
	return nil
}

// checkRepo checks what downloads rely on: a commit id, and each file a
// local path with a size and, for LFS files, a sha256.
func checkRepo(repo Repo, what string) error {
	if !IsCommit(repo.SHA) {
		return fmt.Errorf("%s: %w: sha %.50q is not a commit id", what, ErrProtocol, repo.SHA)
	}
	for _, f := range repo.Siblings {
		if !filepath.IsLocal(f.Name) || path.Clean(f.Name) != f.Name || strings.Contains(f.Name, "\\") {
			return fmt.Errorf("%s: %w: file name %q is not a path inside the repository", what, ErrProtocol, f.Name)
		}
		if f.Size < 0 || (f.LFS != nil && (f.LFS.Size != f.Size || !isHex(f.LFS.SHA256, 64))) {
			return fmt.Errorf("%s: %w: %s: size %d, LFS pointer %+v", what, ErrProtocol, f.Name, f.Size, f.LFS)
		}
		if f.LFS == nil && !isHex(f.BlobID, 40) {
			return fmt.Errorf("%s: %w: %s has neither an LFS sha256 nor a blob id to check it by", what, ErrProtocol, f.Name)
		}
	}
	return nil
}

func isHex(s string, n int) bool {
	return len(s) == n && strings.Trim(strings.ToLower(s), "0123456789abcdef") == ""
}

// ResolveURL is where a file of a repository at a commit is downloaded
// from: {endpoint}/{id}/resolve/{commit}/{path}.
func (c *Client) ResolveURL(id, commit, name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return fmt.Sprintf("%s/%s/resolve/%s/%s", c.Endpoint, id, commit, strings.Join(parts, "/"))
}
