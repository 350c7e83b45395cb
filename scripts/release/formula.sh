#!/usr/bin/env bash
# Renders the release's Homebrew formula: TEMPLATE with the sha256 of its stable url
# set to SOURCE_ARCHIVE's, written to OUT.
#
#   scripts/release/formula.sh TEMPLATE SOURCE_ARCHIVE OUT
#
# scripts/build_release.sh runs it on Formula/machofix.rb. That file holds either
# the placeholder (all zeros) or the sum of the release it was last rendered for (a
# release commit copies the rendered file back), so any 64-hex sum is replaced. Only
# the stable url's: the LIEF resource's sum is pinned and must stay.
set -euo pipefail
[ $# -eq 3 ] || { echo "usage: $0 TEMPLATE SOURCE_ARCHIVE OUT" >&2; exit 2; }
template=$1 archive=$2 out=$3
die() { echo "formula.sh: $*" >&2; exit 1; }
[ -f "$template" ] || die "$template: no such file"
[ -f "$archive" ] || die "$archive: no such file"

name=$(basename "$archive")
[[ $name =~ ^machofix-([0-9]+\.[0-9]+\.[0-9]+)\.tar\.gz$ ]] || die "$archive: not named machofix-VERSION.tar.gz"
version=${BASH_REMATCH[1]}

# The stable url is the class body's own `url`, two spaces in (Homebrew's style);
# a resource's or a `head do` block's is deeper. There must be exactly one, and it
# must name this very archive: a formula left at another version would install
# other sources than the sum says.
count=$(grep -c '^  url "' "$template" || true)
[ "$count" = 1 ] || die "$template: $count top-level url lines, expected 1"
url=$(sed -n 's/^  url "\([^"]*\)".*/\1/p' "$template")
[[ $url == */v$version/$name ]] ||
  die "$template: its url $url is not v$version's $name: set the url's version to the release's ($version)"

if command -v sha256sum >/dev/null; then sum=$(sha256sum "$archive"); else sum=$(shasum -a 256 "$archive"); fi  # Debian / macOS
sum=${sum%% *}

# The first top-level sha256 line after the url: 64 hex digits, replaced.
status=0
awk -v sum="$sum" '
  /^  url "/ { after_url = 1 }
  after_url && !done && /^  sha256 "/ {
    old = $0
    sub(/^  sha256 "/, "", old)
    if (old !~ /^[0-9a-f]+"$/ || length(old) != 65) { bad = $0; exit }
    print "  sha256 \"" sum "\""
    done = 1
    next
  }
  { print }
  END {
    if (bad != "") { print "formula.sh: not 64 hex digits: " bad > "/dev/stderr"; exit 3 }
    if (!done) { print "formula.sh: no top-level sha256 line after the url" > "/dev/stderr"; exit 4 }
  }' "$template" >"$out.part" || status=$?
[ "$status" = 0 ] || { rm -f "$out.part"; die "$template: not rendered"; }
# A formula that does not parse is not released.
if command -v ruby >/dev/null; then
  ruby -c "$out.part" >/dev/null || { rm -f "$out.part"; die "$out: ruby -c fails"; }
fi
mv "$out.part" "$out"
echo "formula.sh: $out: sha256 $sum ($name)"
