// Package version is context-fold's one version: the engine, the Pi
// adapter and every npm package carry the same number, and the adapter
// refuses an engine whose number differs (see the protocol's hello).
package version

import (
	"runtime"
	"runtime/debug"
)

// Number is the release version. package.json's "version" and every
// optionalDependencies pin must equal it; TestPackageJSON enforces that.
const Number = "0.2.0"

// build can be set with -ldflags "-X …/internal/version.build=…" where the
// VCS stamp is unavailable (a build outside a git checkout).
var build string

// Build identifies the exact build: the commit it was built from (12 hex
// digits, "-dirty" when the tree had changes), or "unknown".
func Build() string {
	if build != "" {
		return build
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	var rev string
	var dirty bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}

// Platform is the npm platform name of this binary ("linux-x64",
// "win32-x64"): the suffix of the platform package that ships it.
func Platform() string {
	return NPMPlatform(runtime.GOOS, runtime.GOARCH)
}

// NPMPlatform maps a Go GOOS/GOARCH pair to Node's process.platform and
// process.arch names.
func NPMPlatform(goos, goarch string) string {
	os := goos
	if goos == "windows" {
		os = "win32"
	}
	arch := goarch
	switch goarch {
	case "amd64":
		arch = "x64"
	case "386":
		arch = "ia32"
	}
	return os + "-" + arch
}

// String is the one-line form `contextfold version` prints.
func String() string {
	return "contextfold " + Number + " (build " + Build() + ", " + Platform() + ", " + runtime.Version() + ")"
}
