package e2e

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha1"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// registry is an npm registry on loopback serving a set of tarballs: the
// packument (GET /<name>) and the tarball (GET /-/<file>), 404 for any other
// name. It is what `pi install npm:<name>@<version>` needs to run as a
// user's would, without publishing anything.
type registry struct {
	URL  string
	mu   sync.Mutex
	pkgs map[string]registryPkg
	asks []string
}

type registryPkg struct {
	manifest map[string]any
	file     string
	data     []byte
}

// startRegistry serves the given tarballs until the test ends.
func startRegistry(t *testing.T, tarballs ...string) *registry {
	t.Helper()
	r := &registry{pkgs: map[string]registryPkg{}}
	for _, path := range tarballs {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := fileInTarball(data, "package/package.json")
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatalf("%s: package.json: %v", path, err)
		}
		name, _ := m["name"].(string)
		r.pkgs[name] = registryPkg{manifest: m, file: filepath.Base(path), data: data}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: r}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	r.URL = "http://" + ln.Addr().String() + "/"
	return r
}

// Asked returns the package names npm asked for, in order.
func (r *registry) Asked() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.asks...)
}

func (r *registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	path, _ := url.PathUnescape(strings.TrimPrefix(req.URL.EscapedPath(), "/"))
	if file, ok := strings.CutPrefix(path, "-/"); ok {
		for _, p := range r.pkgs {
			if p.file == file {
				w.Header().Set("Content-Type", "application/octet-stream")
				w.Write(p.data)
				return
			}
		}
		http.NotFound(w, req)
		return
	}
	r.mu.Lock()
	r.asks = append(r.asks, path)
	r.mu.Unlock()
	p, ok := r.pkgs[path]
	if !ok {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		io.WriteString(w, `{"error":"Not found"}`)
		return
	}
	sum512 := sha512.Sum512(p.data)
	sum1 := sha1.Sum(p.data)
	v := map[string]any{}
	for k, x := range p.manifest {
		v[k] = x
	}
	v["dist"] = map[string]any{
		"tarball":   r.URL + "-/" + p.file,
		"integrity": "sha512-" + base64.StdEncoding.EncodeToString(sum512[:]),
		"shasum":    hex.EncodeToString(sum1[:]),
	}
	if scripts, _ := p.manifest["scripts"].(map[string]any); scripts["postinstall"] != nil || scripts["install"] != nil || scripts["preinstall"] != nil {
		v["hasInstallScript"] = true
	}
	ver, _ := p.manifest["version"].(string)
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{
		"name":      path,
		"dist-tags": map[string]string{"latest": ver},
		"versions":  map[string]any{ver: v},
	})
}

// fileInTarball returns one file's bytes from a gzipped tarball.
func fileInTarball(tgz []byte, name string) ([]byte, error) {
	zr, err := gzip.NewReader(strings.NewReader(string(tgz)))
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, errors.New(name + " not in the tarball")
		}
		if err != nil {
			return nil, err
		}
		if h.Name == name {
			return io.ReadAll(tr)
		}
	}
}
