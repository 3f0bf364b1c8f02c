package proxy

import (
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestHostAndOrigin: a request is served only when its Host names a
// loopback host, the listen address or a listed host, and it comes from no
// web page of another origin or site; a refused one gets 403 in its API's
// error shape, naming the flag, reaches no upstream, and carries no CORS
// headers.
func TestHostAndOrigin(t *testing.T) {
	type policy struct {
		listen  string
		allowed []string
	}
	var (
		loopback = policy{}
		lan      = policy{listen: "192.168.1.5"}
		any4     = policy{listen: "0.0.0.0"}
		any6     = policy{listen: "::"}
		gateway  = policy{allowed: []string{"gw.example", "10.0.0.7"}}
		anyHost  = policy{allowed: []string{AnyHost, "gw.example"}}
	)
	long := strings.Repeat("a", 300) + ".example"
	cases := []struct {
		name   string
		policy policy
		method string
		host   string
		header map[string]string
		served bool
	}{
		{"loopback address", loopback, "POST", "127.0.0.1:8719", nil, true},
		{"loopback address, no port", loopback, "POST", "127.0.0.1", nil, true},
		{"other loopback address", loopback, "POST", "127.1.2.3:80", nil, true},
		{"localhost", loopback, "POST", "localhost:8719", nil, true},
		{"localhost, upper case, fully qualified", loopback, "POST", "LocalHost.:8719", nil, true},
		{"name under localhost", loopback, "POST", "app.localhost:8719", nil, true},
		{"IPv6 loopback", loopback, "POST", "[::1]:8719", nil, true},
		{"IPv6 loopback, no port", loopback, "POST", "[::1]", nil, true},
		{"IPv4-mapped loopback", loopback, "POST", "[::ffff:127.0.0.1]:8719", nil, true},
		{"other name", loopback, "POST", "evil.example:8719", nil, false},
		{"other name, no port", loopback, "POST", "evil.example", nil, false},
		{"long name", loopback, "POST", long, nil, false},
		{"localhost as a subdomain", loopback, "POST", "localhost.evil.example:8719", nil, false},
		{"name ending in localhost", loopback, "POST", "evillocalhost:8719", nil, false},
		{"LAN address, loopback listen", loopback, "POST", "192.168.1.5:8719", nil, false},
		{"bad port", loopback, "POST", "localhost:8719x", nil, false},
		{"unspecified address", loopback, "POST", "0.0.0.0:8719", nil, false},

		{"listen address", lan, "POST", "192.168.1.5:8719", nil, true},
		{"listen address, other port", lan, "POST", "192.168.1.5", nil, true},
		{"other LAN address", lan, "POST", "192.168.1.6:8719", nil, false},
		{"loopback, LAN listen", lan, "POST", "localhost:8719", nil, true},
		{"unspecified IPv4 listen", any4, "POST", "0.0.0.0:8719", nil, false},
		{"LAN address, unspecified IPv4 listen", any4, "POST", "192.168.1.5:8719", nil, false},
		{"loopback, unspecified IPv4 listen", any4, "POST", "127.0.0.1:8719", nil, true},
		{"unspecified IPv6 listen", any6, "POST", "[::]:8719", nil, false},

		{"listed name", gateway, "POST", "gw.example:443", nil, true},
		{"listed name, other case", gateway, "POST", "GW.Example", nil, true},
		{"listed address", gateway, "POST", "10.0.0.7:8719", nil, true},
		{"name under a listed one", gateway, "POST", "a.gw.example", nil, false},
		{"unlisted name", gateway, "POST", "evil.example", nil, false},
		{"any host", anyHost, "POST", "evil.example:8719", nil, true},

		{"loopback origin", loopback, "POST", "127.0.0.1:8719", map[string]string{"Origin": "http://localhost:3000"}, true},
		{"IPv6 loopback origin", loopback, "POST", "127.0.0.1:8719", map[string]string{"Origin": "http://[::1]:3000"}, true},
		{"other origin", loopback, "POST", "127.0.0.1:8719", map[string]string{"Origin": "https://evil.example"}, false},
		{"null origin", loopback, "POST", "127.0.0.1:8719", map[string]string{"Origin": "null"}, false},
		{"empty origin", loopback, "POST", "127.0.0.1:8719", map[string]string{"Origin": ""}, false},
		{"listen address origin", lan, "POST", "192.168.1.5:8719", map[string]string{"Origin": "http://192.168.1.5:8080"}, true},
		{"listed origin", gateway, "POST", "gw.example", map[string]string{"Origin": "https://gw.example"}, true},
		{"unlisted origin, listed host", gateway, "POST", "gw.example", map[string]string{"Origin": "https://evil.example"}, false},
		{"any host, other origin", anyHost, "POST", "evil.example", map[string]string{"Origin": "https://evil.example"}, false},
		{"any host, null origin", anyHost, "POST", "evil.example", map[string]string{"Origin": "null"}, false},
		{"any host, listed origin", anyHost, "POST", "evil.example", map[string]string{"Origin": "https://gw.example"}, true},
		{"any host, loopback origin", anyHost, "POST", "evil.example", map[string]string{"Origin": "http://localhost"}, true},
		{"rebound name, same origin", loopback, "POST", "evil.example:8719", map[string]string{"Origin": "http://evil.example:8719"}, false},

		{"same-origin fetch", loopback, "POST", "127.0.0.1:8719", map[string]string{"Sec-Fetch-Site": "same-origin"}, true},
		{"typed address", loopback, "GET", "127.0.0.1:8719", map[string]string{"Sec-Fetch-Site": "none"}, true},
		{"cross-site fetch", loopback, "GET", "127.0.0.1:8719", map[string]string{"Sec-Fetch-Site": "cross-site"}, false},
		{"cross-site fetch, loopback origin", loopback, "POST", "127.0.0.1:8719", map[string]string{"Origin": "http://localhost:3000", "Sec-Fetch-Site": "cross-site"}, false},
		{"any host, cross-site fetch", anyHost, "POST", "evil.example", map[string]string{"Sec-Fetch-Site": "Cross-Site"}, false},

		{"preflight from another origin", loopback, "OPTIONS", "127.0.0.1:8719", map[string]string{"Origin": "https://evil.example", "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type,x-api-key"}, false},
		{"preflight to another host", loopback, "OPTIONS", "evil.example:8719", map[string]string{"Origin": "http://evil.example:8719", "Access-Control-Request-Method": "POST"}, false},
	}
	type proxyOf struct {
		base string
		logs interface{ String() string }
	}
	ant := newUpstream(t, "anthropic", nil)
	oai := newUpstream(t, "openai", nil)
	proxies := map[string]proxyOf{}
	for _, pol := range []policy{loopback, lan, any4, any6, gateway, anyHost} {
		s, logs := front(t, ant, oai, func(c *Config) { c.ListenHost, c.AllowedHosts = pol.listen, pol.allowed })
		proxies[pol.listen+strings.Join(pol.allowed, ",")] = proxyOf{s.URL, logs}
	}
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	for _, c := range cases {
		for _, route := range []struct {
			path string
			api  API
			to   *upstream
		}{{"/v1/messages", Anthropic, ant}, {"/v1/chat/completions", OpenAI, oai}} {
			t.Run(c.name+" "+route.api.String(), func(t *testing.T) {
				p := proxies[c.policy.listen+strings.Join(c.policy.allowed, ",")]
				before := len(route.to.requests())
				req, _ := http.NewRequest(c.method, p.base+route.path, strings.NewReader(`{"model":"m"}`))
				req.Host = c.host
				for k, v := range c.header {
					req.Header.Set(k, v)
				}
				res, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				body, _ := io.ReadAll(res.Body)
				res.Body.Close()
				forwarded := len(route.to.requests()) - before
				if c.served {
					if res.StatusCode != 200 || forwarded != 1 {
						t.Fatalf("status %d, %d requests forwarded, want 200 and one: %s", res.StatusCode, forwarded, body)
					}
					return
				}
				if res.StatusCode != http.StatusForbidden || forwarded != 0 {
					t.Fatalf("status %d, %d requests forwarded, want 403 and none: %s", res.StatusCode, forwarded, body)
				}
				for k := range res.Header {
					if strings.HasPrefix(k, "Access-Control-") {
						t.Errorf("the refusal carries %s", k)
					}
				}
				var e struct {
					Type  string
					Error struct{ Type, Message string }
				}
				if err := json.Unmarshal(body, &e); err != nil {
					t.Fatalf("answer %q: %v", body, err)
				}
				if (route.api == Anthropic) != (e.Type == "error") || e.Error.Type != "permission_error" || !strings.Contains(e.Error.Message, "-allow-host") {
					t.Errorf("answer %s, want a permission_error in %s's shape naming -allow-host", body, route.api)
				}
			})
		}
	}
	logs := proxies[""].logs.String()
	if !strings.Contains(logs, "refused a request addressed to another host") || !strings.Contains(logs, "host=evil.example:8719") {
		t.Errorf("no warning names the refused host:\n%s", logs)
	}
	if strings.Contains(logs, strings.Repeat("a", 101)) || !strings.Contains(logs, strings.Repeat("a", 100)+"...") {
		t.Errorf("the long host is not cut to 100 bytes in the log")
	}
}

// TestRefusedBeforeTheFolder: a refused request that would fold leaves no
// file in the store; the same request served does.
func TestRefusedBeforeTheFolder(t *testing.T) {
	up := newUpstream(t, "openai", nil)
	dir := t.TempDir()
	base, stop := foldingFront(t, up, dir, 0)
	defer stop()
	files := func() int {
		n := 0
		filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				n++
			}
			return nil
		})
		return n
	}
	empty := files()
	cl := clients[0]
	post := func(host string) int {
		req, _ := http.NewRequest("POST", base+cl.path, strings.NewReader(cl.body(3)))
		req.Host = host
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res.StatusCode
	}
	if code := post("evil.example:8719"); code != http.StatusForbidden {
		t.Fatalf("status %d, want 403", code)
	}
	if n := files(); n != empty || len(up.requests()) != 0 {
		t.Fatalf("refused: %d files in the store (from %d), %d requests upstream", n, empty, len(up.requests()))
	}
	if code := post("localhost"); code != 200 {
		t.Fatalf("served: status %d", code)
	}
	if n := files(); n == empty {
		t.Fatal("served: no file in the store, so the refusal shows nothing")
	}
}

func TestCheckAllowedHost(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
	}{
		{"gw.example", true},
		{"GW.Example.", true},
		{"my_host", true},
		{"10.0.0.7", true},
		{"fe80::1", true},
		{"[fe80::1]", true},
		{AnyHost, true},
		{"", false},
		{"gw.example:8080", false},
		{"[fe80::1]:8080", false},
		{"http://gw.example", false},
		{"gw.example/", false},
		{"*.example", false},
		{"a b", false},
	} {
		if err := CheckAllowedHost(c.in); (err == nil) != c.ok {
			t.Errorf("%q: err %v, want ok=%v", c.in, err, c.ok)
		}
	}
	if _, err := New(Config{AllowedHosts: []string{"gw.example:1"}}); err == nil {
		t.Error("New takes an allowed host with a port")
	}
}
