#!/usr/bin/env bash
# Publishes dist/ (built by `make dist`): the engine packages first, since
# the Pi package pins them, then the Pi package. A dry run unless PUBLISH=1;
# publishing needs npm credentials (a token, or trusted publishing from the
# release workflow). Run from `make release`.
set -euo pipefail
cd "$(dirname "$0")/../dist"
NPM="${NPM:-npm}"
sha256sum -c --quiet SHA256SUMS
args=(--access public)
if [[ "${PUBLISH:-}" != 1 ]]; then
  args+=(--dry-run)
  echo "release: dry run (PUBLISH=1 publishes)" >&2
fi
main=""
for t in ./*.tgz; do
  case "$t" in
    ./contextfold-*) "$NPM" publish "${args[@]}" "$t" ;;
    *) main="$t" ;;
  esac
done
"$NPM" publish "${args[@]}" "$main"
