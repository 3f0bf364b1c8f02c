#!/usr/bin/env bash
# Builds the npm packages into dist/: one engine package per platform
# (contextfold-<platform>, one stripped binary cross-compiled with cgo off)
# and the Pi package, each an `npm pack` tarball, plus SHA256SUMS.
# package.json is the source of the version and of the platform list.
# Env: GO, NODE, NPM (default: go, node, npm on PATH); PLATFORMS: the engine
# packages to build, space-separated (linux-x64 …), or "host" for this
# machine's alone (`make pack`); default all of package.json's.
# Node only reads package.json and npm only packs, so any Node npm runs on
# will do (20 included); Pi's Node is not needed to pack.
set -euo pipefail
cd "$(dirname "$0")/.."
GO="${GO:-go}"; NODE="${NODE:-node}"; NPM="${NPM:-npm}"

pkg() { "$NODE" -e "const p=require('./package.json');process.stdout.write(String($1))"; }
VERSION="$(pkg p.version)"
NAME="$(pkg p.name)"
ALL="$(pkg "Object.keys(p.optionalDependencies).filter(n=>n.startsWith('contextfold-')).map(n=>n.slice(12)).join(' ')")"
HOST="$("$NODE" -p 'process.platform+"-"+process.arch')"
case "${PLATFORMS:-}" in
  "") PLATFORMS="$ALL" ;;
  host) PLATFORMS="$HOST" ;;
esac
for plat in $PLATFORMS; do
  [[ " $ALL " == *" $plat "* ]] || { echo "dist: no engine package for $plat (package.json has $ALL)" >&2; exit 2; }
done
BUILD="$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
if [[ "$BUILD" != unknown ]] && ! git diff --quiet HEAD -- 2>/dev/null; then BUILD="$BUILD-dirty"; fi
LDFLAGS="-s -w -X github.com/contextfold/contextfold/internal/core/version.build=$BUILD"

rm -rf dist && mkdir -p dist/npm
for plat in $PLATFORMS; do
  os="${plat%%-*}"; arch="${plat#*-}"
  goos="$os"; [[ "$os" == win32 ]] && goos=windows
  goarch="$arch"; [[ "$arch" == x64 ]] && goarch=amd64
  exe=contextfold; [[ "$os" == win32 ]] && exe=contextfold.exe
  dir="dist/npm/contextfold-$plat"
  mkdir -p "$dir/bin"
  echo "dist: contextfold-$plat ($goos/$goarch)" >&2
  CGO_ENABLED=0 GOOS="$goos" GOARCH="$goarch" "$GO" build -trimpath -ldflags "$LDFLAGS" -o "$dir/bin/$exe" ./cmd/contextfold
  cp LICENSE "$dir/"
  "$NODE" -e '
    const [name, version, os, cpu, main] = process.argv.slice(1);
    const p = { name, version, description: `The contextfold engine for ${os}-${cpu}, installed by ${main}`,
      license: "MIT", os: [os], cpu: [cpu], files: ["bin/"], preferUnplugged: true };
    require("fs").writeFileSync(process.argv[6], JSON.stringify(p, null, 2) + "\n");
  ' "contextfold-$plat" "$VERSION" "$os" "$arch" "$NAME" "$dir/package.json"
  printf '# contextfold-%s\n\nThe prebuilt contextfold %s engine for %s, built with cgo off from commit %s.\nIt is installed as an optional dependency of %s, which finds it; do not depend on it directly.\n' \
    "$plat" "$VERSION" "$plat" "$BUILD" "$NAME" >"$dir/README.md"
  (cd "$dir" && "$NPM" pack --silent --pack-destination "$OLDPWD/dist" >/dev/null)
done
echo "dist: $NAME" >&2
"$NPM" pack --silent --pack-destination dist >/dev/null
# The host build must report exactly this version (the adapter checks it).
if [[ -x "dist/npm/contextfold-$HOST/bin/contextfold" ]]; then
  got="$("dist/npm/contextfold-$HOST/bin/contextfold" version -json)"
  [[ "$got" == *"\"version\":\"$VERSION\""* ]] || { echo "dist: engine reports $got, package.json says $VERSION" >&2; exit 1; }
fi
(cd dist && sha256sum ./*.tgz | sed 's#\./##' >SHA256SUMS)
cat dist/SHA256SUMS
