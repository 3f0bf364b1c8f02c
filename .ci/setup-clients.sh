#!/usr/bin/env bash
# Install the real coding-agent CLIs the client end-to-end tests drive
# (e2e/clients_test.go), each into its own npm prefix in the project-local
# cache, plus a pre-installed opencode config dir:
#   $CACHE/clients/claude     @anthropic-ai/claude-code@2.1.332
#   $CACHE/clients/codex      @openai/codex@0.169.1
#   $CACHE/clients/opencode   opencode-ai@1.18.33
#   $CACHE/clients/opencode-config-seed   @opencode-ai/plugin@1.18.33 (opencode
#       installs it into its config dir at every start; a copy of this dir
#       makes that a no-op, so a run resolves no host at all)
# Prints only shell exports on stdout; progress goes to stderr. Usage:
#   eval "$(.ci/setup-clients.sh)"
# Env: CONTEXTFOLD_CACHE (default <repo>/.cache). Uses the Node of
# .ci/setup-pi.sh (CONTEXTFOLD_NODE, evaluated here when unset) for the
# packages' install scripts, and the npm on PATH (else one next to that Node).
set -euo pipefail

CLAUDE_PKG="@anthropic-ai/claude-code"
CLAUDE_VERSION="2.1.332"
CODEX_PKG="@openai/codex"
CODEX_VERSION="0.169.1"
OPENCODE_PKG="opencode-ai"
OPENCODE_VERSION="1.18.33"

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(dirname "$SCRIPT_DIR")"
CACHE="${CONTEXTFOLD_CACHE:-$REPO/.cache}"
mkdir -p "$CACHE"
CACHE="$(cd "$CACHE" && pwd)"
DIR="$CACHE/clients"
mkdir -p "$DIR"

log() { echo "setup-clients: $*" >&2; }

CLAUDE_BIN="$DIR/claude/bin/claude"
CODEX_BIN="$DIR/codex/bin/codex"
OPENCODE_BIN="$DIR/opencode/bin/opencode"
SEED="$DIR/opencode-config-seed"
CLAUDE_EXE="$DIR/claude/lib/node_modules/$CLAUDE_PKG/bin/claude.exe"
OPENCODE_EXE="$DIR/opencode/lib/node_modules/$OPENCODE_PKG/bin/opencode.exe"
# The marker records what a completed, verified install holds; a run that
# finds it (and the binaries) does nothing else.
MARKER="$DIR/.installed"
WANT="claude=$CLAUDE_VERSION codex=$CODEX_VERSION opencode=$OPENCODE_VERSION seed=$OPENCODE_VERSION"

emit() {
  printf 'export CONTEXTFOLD_CLAUDE=%q\n' "$CLAUDE_BIN"
  printf 'export CONTEXTFOLD_CODEX=%q\n' "$CODEX_BIN"
  printf 'export CONTEXTFOLD_OPENCODE=%q\n' "$OPENCODE_BIN"
  printf 'export CONTEXTFOLD_OPENCODE_SEED=%q\n' "$SEED"
}

# size FILE: its size in bytes, 0 when missing
size() { stat -c %s "$1" 2>/dev/null || echo 0; }

# A placeholder bin (claude-code and opencode-ai ship a ~500-byte one that
# their postinstall replaces with the platform package's native binary).
is_placeholder() { [[ "$(size "$1")" -lt 100000 ]]; }

if [[ -f "$MARKER" && "$(cat "$MARKER")" == "$WANT" && -x "$CLAUDE_BIN" && -x "$CODEX_BIN" && -x "$OPENCODE_BIN" \
  && -d "$SEED/node_modules/@opencode-ai/plugin" ]] && ! is_placeholder "$CLAUDE_EXE" && ! is_placeholder "$OPENCODE_EXE"; then
  log "using cached clients ($WANT)"
  emit
  exit 0
fi

# --- Node and npm -------------------------------------------------------------
if [[ -z "${CONTEXTFOLD_NODE:-}" ]]; then
  eval "$("$SCRIPT_DIR/setup-pi.sh")"
fi
NODE="$CONTEXTFOLD_NODE"
NODE_DIR="$(dirname "$NODE")"
NPM="$(command -v npm || true)"
if [[ -z "$NPM" && -x "$NODE_DIR/npm" ]]; then NPM="$NODE_DIR/npm"; fi
[[ -n "$NPM" ]] || { log "npm not found (neither on PATH nor next to $NODE)"; exit 1; }
# Node >= 22 first on PATH: claude-code declares engines.node >= 22, and the
# install scripts run with whatever node is found there.
export PATH="$NODE_DIR:$PATH"

# opencode's postinstall runs `opencode --version`, which creates XDG dirs
# (~/.config/opencode, ~/.local/share/opencode, ...) and a Bun temp file;
# keep them out of the real home and /tmp. HOME itself stays: npm reads its
# own configuration (registry, cache) from there.
IH="$DIR/.install-home"
rm -rf "$IH"
mkdir -p "$IH/tmp"
trap 'rm -rf "$IH"' EXIT
export XDG_CONFIG_HOME="$IH/.config" XDG_DATA_HOME="$IH/.local/share" XDG_CACHE_HOME="$IH/.cache" \
  XDG_STATE_HOME="$IH/.local/state" TMPDIR="$IH/tmp"
NPM_FLAGS=(--no-fund --no-audit --loglevel=error)

# installed_version PKGJSON: the "version" of a package.json, "" when missing
installed_version() {
  [[ -f "$1" ]] || return 0
  "$NODE" -e 'process.stdout.write(String(require(process.argv[1]).version || ""))' "$1" 2>/dev/null || true
}

# inst NAME PKG VERSION: npm install -g into $DIR/NAME unless that version is there
inst() {
  local prefix="$DIR/$1"
  if [[ "$(installed_version "$prefix/lib/node_modules/$2/package.json")" == "$3" ]]; then
    log "$2@$3 already in $prefix"
    return 0
  fi
  rm -rf "$prefix"
  log "installing $2@$3 into $prefix"
  "$NPM" install -g --prefix "$prefix" "$2@$3" "${NPM_FLAGS[@]}" >&2
}

rm -f "$MARKER"
pids=()
inst claude "$CLAUDE_PKG" "$CLAUDE_VERSION" & pids+=($!)
inst codex "$CODEX_PKG" "$CODEX_VERSION" & pids+=($!)
inst opencode "$OPENCODE_PKG" "$OPENCODE_VERSION" & pids+=($!)
fail=0
for p in "${pids[@]}"; do wait "$p" || fail=1; done
[[ $fail == 0 ]] || { log "npm install failed"; exit 1; }

# If npm skipped the install scripts (it may, for scripts not covered by
# allowScripts), run the postinstall that swaps in the native binary now.
fix_placeholder() { # bin-file postinstall-script
  if is_placeholder "$1"; then
    log "$1 is a placeholder; running $2"
    (cd "$(dirname "$2")" && "$NODE" "$(basename "$2")") >&2
  fi
  if is_placeholder "$1"; then log "$1 is still a placeholder after $2"; exit 1; fi
}
fix_placeholder "$CLAUDE_EXE" "$DIR/claude/lib/node_modules/$CLAUDE_PKG/install.cjs"
fix_placeholder "$OPENCODE_EXE" "$DIR/opencode/lib/node_modules/$OPENCODE_PKG/postinstall.mjs"

# --- opencode config seed -----------------------------------------------------
if [[ "$(installed_version "$SEED/node_modules/@opencode-ai/plugin/package.json")" != "$OPENCODE_VERSION" ]]; then
  log "installing @opencode-ai/plugin@$OPENCODE_VERSION into $SEED"
  rm -rf "$SEED"
  mkdir -p "$SEED"
  printf '{"dependencies":{"@opencode-ai/plugin":"%s"}}\n' "$OPENCODE_VERSION" >"$SEED/package.json"
  (cd "$SEED" && "$NPM" install "${NPM_FLAGS[@]}") >&2
fi

# --- Verify (with an isolated home: the CLIs write config/state even for --version)
export HOME="$IH" CODEX_HOME="$IH/.codex" CLAUDE_CONFIG_DIR="$IH/.claude" CLAUDE_CODE_TMPDIR="$IH/tmp"
mkdir -p "$CODEX_HOME"
check() { # NAME WANT-VERSION CMD...
  local got
  got="$("${@:3}" 2>/dev/null | head -n 1)" || true
  if [[ "$got" != *"$2"* ]]; then log "verification failed: '${*:3}' printed '$got', expected $2"; exit 1; fi
  log "ok: $1 $got"
}
check claude "$CLAUDE_VERSION" "$CLAUDE_BIN" --version
check codex "$CODEX_VERSION" "$CODEX_BIN" --version
check opencode "$OPENCODE_VERSION" "$OPENCODE_BIN" --version
echo "$WANT" >"$MARKER"
emit
