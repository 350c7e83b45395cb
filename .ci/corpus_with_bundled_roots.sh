#!/usr/bin/env bash
# Run by .ci/run in the pristine root once scripts/test.sh has installed npm and
# ca-certificates: the corpus fetch on a machine whose HTTPS goes through a local
# certificate authority that only the system's CA store holds, with a Node.js that
# trusts only the roots bundled with it (NODE_OPTIONS=--use-bundled-ca: so do the
# builds of nodejs.org and NodeSource; Debian's uses the system store).
#  1. npm alone then fails with a certificate error (else this network has no such
#     authority and there is nothing to show: said, and not a failure);
#  2. tests/corpus/fetch_corpus.py, into an empty cache, retries with the system's
#     CA store as npm's cafile and fetches the smallest pinned package.
set -euo pipefail
cd "$(dirname "$0")/.."
export NODE_OPTIONS=--use-bundled-ca
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export npm_config_cache=$work/npm-cache  # npm's cache would answer without the network

if npm ping --fetch-retries=0 >"$work/ping.log" 2>&1; then
  echo "corpus-tls: npm reaches the registry with Node's bundled roots alone: no local authority on this network, nothing to show"
  exit 0
fi
if ! grep -qE "CERT|certificate" "$work/ping.log"; then
  echo "corpus-tls: FAILED: npm ping fails, but not with a certificate error:"
  sed 's/^/  | /' "$work/ping.log"
  exit 1
fi
echo "corpus-tls: with Node's bundled roots npm alone fails: $(grep -m1 -oE '[A-Z_]*CERT[A-Z_]*' "$work/ping.log")"

python3 - "$work/packages.json" <<'EOF'
import json, sys
packages = json.load(open("tests/corpus/packages.json"))["packages"]
json.dump({"packages": [min(packages, key=lambda p: p["tarball_bytes"])]}, open(sys.argv[1], "w"))
EOF
status=0
python3 tests/corpus/fetch_corpus.py --cache "$work/cache" --packages "$work/packages.json" >"$work/fetch.log" 2>&1 ||
  status=$?
sed 's/^/  | /' "$work/fetch.log"
if [ $status -ne 0 ] || ! grep -q "trying again with the system's CA store" "$work/fetch.log"; then
  echo "corpus-tls: FAILED: fetch_corpus.py exit status $status"
  exit 1
fi
echo "corpus-tls: fetch_corpus.py retried with the system's CA store and fetched the package"
