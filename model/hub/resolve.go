package hub

import (
	"errors"
	"fmt"
	"net"
	"net/url"
)

// ErrUnresolved: the endpoint's host name cannot be resolved (no network,
// no DNS, or a mistyped HF_ENDPOINT). Trying again within the run does not
// mend it, so the client does not retry it; the error says once what else
// there is. Not a usage error: the same pull may work once the network is
// back.
var ErrUnresolved = errors.New("cannot resolve the host")

// unresolved is err as ErrUnresolved when it is a failed name lookup of
// the endpoint's host, with the ways out; nil otherwise.
func (c *Client) unresolved(what string, err error) error {
	var dns *net.DNSError
	if !errors.As(err, &dns) {
		return nil
	}
	host := dns.Name // the endpoint's host, or the host a download was sent on to
	if u, perr := url.Parse(c.Endpoint); host == "" && perr == nil {
		host = u.Hostname()
	}
	return fmt.Errorf("%s: %w %s (%v): no network or no DNS here? Without it: HF_ENDPOINT=URL for a mirror you can reach, "+
		"-m DIR for a model directory downloaded elsewhere, or a model already in the Hugging Face cache (-m ORG/NAME finds it in $HF_HUB_CACHE, $HF_HOME/hub or ~/.cache/huggingface/hub)",
		what, ErrUnresolved, host, dns)
}
