package proxy

// This file decides whom the proxy serves: requests addressed to it by a
// loopback name (or its listen address, or a listed name), and no web page
// of another site. A page on any site can make the browser send requests
// to 127.0.0.1, or rebind its own name to 127.0.0.1 (DNS rebinding); the
// Host, Origin and Sec-Fetch-Site headers, which a page cannot set, tell
// such requests apart from those of a coding agent, which sends no Origin.

import (
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// AnyHost, listed in Config.AllowedHosts, accepts any Host.
const AnyHost = "*"

// hostPolicy is which hosts a request's Host and Origin may name.
type hostPolicy struct {
	anyHost bool            // AnyHost was listed
	names   map[string]bool // listed names, normalized by hostName
	addrs   []netip.Addr    // listed addresses, and the listen address
}

func newHostPolicy(listenHost string, allowed []string) (*hostPolicy, error) {
	h := &hostPolicy{names: map[string]bool{}}
	for _, s := range allowed {
		if s == AnyHost {
			h.anyHost = true
			continue
		}
		if err := CheckAllowedHost(s); err != nil {
			return nil, err
		}
		if a, ok := hostAddr(s); ok {
			h.addrs = append(h.addrs, a)
		} else {
			h.names[hostName(s)] = true
		}
	}
	// An unspecified address (0.0.0.0, ::) is no host a client names.
	if a, ok := hostAddr(listenHost); ok && !a.IsUnspecified() {
		h.addrs = append(h.addrs, a)
	}
	return h, nil
}

// CheckAllowedHost reports whether s can be listed in Config.AllowedHosts:
// AnyHost, a host name or an IP address, without a port.
func CheckAllowedHost(s string) error {
	if s == AnyHost {
		return nil
	}
	if _, ok := hostAddr(s); ok {
		return nil
	}
	if !validName(hostName(s)) {
		return fmt.Errorf("allowed host %q: want a host name or IP address, without a port", s)
	}
	return nil
}

// hostAddr parses s as an IP address, bracketed or not, without its zone.
func hostAddr(s string) (netip.Addr, bool) {
	if len(s) > 1 && s[0] == '[' && s[len(s)-1] == ']' {
		s = s[1 : len(s)-1]
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a.Unmap().WithZone(""), true
}

// hostName is s as a name compares: lower case, without the trailing dot
// of a fully qualified name.
func hostName(s string) string {
	return strings.TrimSuffix(strings.ToLower(s), ".")
}

// validName reports whether s is made of the bytes of DNS names only.
func validName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_') {
			return false
		}
	}
	return true
}

// splitHost is hostport's host, the brackets of an IPv6 literal and any
// port dropped; ok is false for anything but host, host:port, [v6] or
// [v6]:port.
func splitHost(hostport string) (host string, ok bool) {
	rest := ""
	if strings.HasPrefix(hostport, "[") {
		end := strings.IndexByte(hostport, ']')
		if end < 0 {
			return "", false
		}
		host, rest = hostport[:end+1], hostport[end+1:]
	} else {
		host = hostport
		if i := strings.IndexByte(hostport, ':'); i >= 0 {
			host, rest = hostport[:i], hostport[i:]
		}
	}
	if rest != "" {
		if rest[0] != ':' || strings.Trim(rest[1:], "0123456789") != "" {
			return "", false
		}
	}
	return host, host != ""
}

// allows reports whether a request may name hostport (a Host header, or an
// Origin's host) when only loopback, the listen address and the listed
// hosts are served.
func (h *hostPolicy) allows(hostport string) bool {
	host, ok := splitHost(hostport)
	if !ok {
		return false
	}
	if a, ok := hostAddr(host); ok {
		if a.IsLoopback() {
			return true
		}
		for _, b := range h.addrs {
			if a == b {
				return true
			}
		}
		return false
	}
	name := hostName(host)
	if !validName(name) {
		return false
	}
	// RFC 6761: localhost and the names under it are loopback.
	return name == "localhost" || strings.HasSuffix(name, ".localhost") || h.names[name]
}

// refused says why r is not served (nil: it is), and the header value
// that made it so, for the log.
func (h *hostPolicy) refused(r *http.Request) (why *refusal, value string) {
	if !h.anyHost && !h.allows(r.Host) {
		return refusedHost, r.Host
	}
	for _, o := range r.Header.Values("Origin") {
		// "null" (a sandboxed page, a file) parses with no host.
		u, err := url.Parse(o)
		if err != nil || !h.allows(u.Host) {
			return refusedOrigin, o
		}
	}
	if v := r.Header.Get("Sec-Fetch-Site"); strings.EqualFold(v, "cross-site") {
		return refusedCrossSite, v
	}
	return nil, ""
}

// refusal is a reason to refuse a request: the log's words, the header
// it logs, and the answer's message.
type refusal struct{ log, header, message string }

var (
	refusedHost = &refusal{
		"refused a request addressed to another host", "host",
		"contextfold proxy serves only requests addressed to a loopback host name or its listen address; to serve another name, start it with -allow-host and that name",
	}
	refusedOrigin = &refusal{
		"refused a request from a web page of another host", "origin",
		"contextfold proxy refuses requests from web pages of other hosts; to accept the pages of a host, start it with -allow-host and that host's name",
	}
	refusedCrossSite = &refusal{
		"refused a cross-site request from a web page", "sec_fetch_site",
		"contextfold proxy refuses requests a browser marks as cross-site (Sec-Fetch-Site), whatever -allow-host lists",
	}
)

// logValue is a header value cut to 100 bytes: it is the client's, and
// one refused request gets one short line.
func logValue(s string) string {
	if len(s) > 100 {
		return s[:100] + "..."
	}
	return s
}
