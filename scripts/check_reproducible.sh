#!/usr/bin/env bash
# Two release builds of HEAD that must give the same bytes, whoever builds and wherever
# the checkout lies (docs/release.md, "Reproducible"):
#   A  root, umask 022, a clone at WORK/a/machofix;
#   B  the user machofix-repro (made for the run, removed after), umask 077, a clone at
#      WORK/b/another/deeper/path;
# sharing the cache of built libraries (MACHOFIX_CACHE_DIR, default ~/.cache/machofix:
# B builds with a copy it owns) and the signing tool (build/machofix, an input like
# zig). ccache is off, so each build compiles machofix itself. Every artefact of A's
# OUTDIR is compared with B's; for an archive or wheel that differs, the members that
# differ are named.
#
#   scripts/check_reproducible.sh [TARGET...]      (as root; TARGETs as build_release.sh's)
#
# Exit status 0 when every artefact is byte-identical, 1 when one differs or a build fails.
# MACHOFIX_REPRO_KEEP=1 keeps the work directory (A's artefacts can then be checked with
# scripts/check_release.sh).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
[ "$(id -u)" -eq 0 ] || { echo "check_reproducible: needs root (it builds as a second user)" >&2; exit 1; }
[ -x "$repo/build/machofix" ] || { echo "check_reproducible: no build/machofix: run scripts/setup.sh" >&2; exit 1; }
cache=${MACHOFIX_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/machofix}
user=machofix-repro
# LIEF's archive where the checkout finds it (../shared/third_party), for clones that
# lie elsewhere; else build_lief.sh downloads it.
lief_tarball=${MACHOFIX_LIEF_TARBALL:-$repo/../shared/third_party/LIEF-0.9.0.tar.gz}
[ -f "$lief_tarball" ] && export MACHOFIX_LIEF_TARBALL=$lief_tarball
work=$(mktemp -d "${MACHOFIX_CI_WORK:-/var/tmp}/machofix-repro.XXXXXX")
chmod 755 "$work"
cleanup() {
  userdel "$user" >/dev/null 2>&1 || true
  if [ -n "${MACHOFIX_REPRO_KEEP:-}" ]; then echo "check_reproducible: kept $work (A's artefacts: $work/a/out)"; else rm -rf "$work"; fi
}
trap cleanup EXIT
say() { echo "check_reproducible: $*"; }

clone_at() {  # DIRECTORY: a clone of HEAD there
  mkdir -p "$(dirname "$1")"
  git clone -q --no-hardlinks "$repo" "$1"
  git -C "$1" checkout -q --detach "$(git -C "$repo" rev-parse HEAD)"
}

a=$work/a/machofix
b=$work/b/another/deeper/path
clone_at "$a"
clone_at "$b"
userdel "$user" >/dev/null 2>&1 || true
useradd --home-dir "$work/b/home" --create-home --shell /bin/bash "$user"
say "building A: root, umask 022, $a"
start=$(date +%s)
(umask 022 && cd "$a" && CCACHE_DISABLE=1 MACHOFIX_CACHE_DIR=$cache MACHOFIX_HOST_TOOL=$repo/build/machofix \
  scripts/build_release.sh "$work/a/out" "$@") || { say "build A failed"; exit 1; }
say "A took $(($(date +%s) - start)) s"
# B's copy of the libraries A built or found (the release cache only: what a build reads).
mkdir -p "$work/b/cache/release"
cp -a "$cache/release/." "$work/b/cache/release/"  # the tree, also where release/ is a link
chown -R "$user:" "$work/b"
say "building B: $user, umask 077, $b"
start=$(date +%s)
runuser -u "$user" -- env -i HOME="$work/b/home" PATH="$PATH" LANG=C.UTF-8 MACHOFIX_LIEF_TARBALL="${MACHOFIX_LIEF_TARBALL:-}" bash -c \
  'umask 077 && cd "$1" && shift && CCACHE_DISABLE=1 MACHOFIX_CACHE_DIR=$0/b/cache MACHOFIX_HOST_TOOL=$1 \
     scripts/build_release.sh "$0/b/out" "${@:2}"' "$work" "$b" "$repo/build/machofix" "$@" ||
  { say "build B failed"; exit 1; }
say "B took $(($(date +%s) - start)) s"

# The members of two archives (tar.gz or wheel) whose bytes differ.
differing_members() {
  /usr/bin/python3 - "$1" "$2" <<'EOF'
import hashlib, sys, tarfile, zipfile
def members(path):
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            return {i.filename: (hashlib.sha256(z.read(i)).hexdigest(), i.external_attr, i.date_time) for i in z.infolist()}
    with tarfile.open(path) as t:
        return {m.name: (hashlib.sha256(t.extractfile(m).read()).hexdigest() if m.isfile() else m.type, m.mode, m.mtime,
                         m.uid, m.gid) for m in t.getmembers()}
left, right = members(sys.argv[1]), members(sys.argv[2])
for name in sorted(set(left) | set(right)):
    if left.get(name) != right.get(name):
        print(f"    {name}: {left.get(name)} / {right.get(name)}")
EOF
}

same=0
differ=0
for artefact in "$work/a/out"/*; do
  name=$(basename "$artefact")
  if cmp -s "$artefact" "$work/b/out/$name"; then
    say "identical: $name ($(sha256sum "$artefact" | cut -c1-16)...)"
    same=$((same + 1))
  else
    say "DIFFERS: $name"
    [ -f "$work/b/out/$name" ] && case $name in *.tar.gz | *.whl) differing_members "$artefact" "$work/b/out/$name" | head -20 ;; esac
    differ=$((differ + 1))
  fi
done
extra=$(comm -13 <(ls "$work/a/out") <(ls "$work/b/out"))
[ -z "$extra" ] || { say "only in B: $extra"; differ=$((differ + 1)); }
say "$same identical, $differ differing"
[ "$differ" -eq 0 ] && [ "$same" -gt 0 ]
