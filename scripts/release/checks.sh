# shellcheck shell=bash
# The checks of scripts/check_release.sh, one function per artefact kind. Sourced by
# it, which defines repo, outdir, version, reference, work, expect, pass, failure.

# What a manylinux2014 binary may need (the policy's libraries, as PEP 599 lists
# them, of which machofix needs these at most) and its newest glibc symbol version.
MANYLINUX_LIBRARIES="libc.so.6 libm.so.6 libdl.so.2 libpthread.so.0 librt.so.1 ld-linux-x86-64.so.2 ld-linux-aarch64.so.1"
MANYLINUX_GLIBC=2.17

# binutils' objdump for an architecture (Debian's objdump reads x86 only).
objdump_for() { [ "$1" = x86_64 ] && echo objdump || echo aarch64-linux-gnu-objdump; }

# Every versioned symbol a file imports is GLIBC_2.x with x <= 17; nothing else.
glibc_versions_ok() {
  local objdump=$1 file=$2 versions
  versions=$("$objdump" -T "$file" | awk '$0 ~ /\*UND\*/ { for (i = 1; i <= NF; i++) if ($i ~ /^\(?[A-Z]+_[0-9.]+\)?$/) print $i }' |
    tr -d '()' | sort -u)
  echo "needs: $(echo $versions)"
  [ -n "$versions" ] || { echo "no glibc symbol version at all"; return 1; }
  local version
  for version in $versions; do
    [[ $version == GLIBC_* ]] || { echo "$version is not glibc's"; return 1; }
    printf '%s\n%s\n' "${version#GLIBC_}" "$MANYLINUX_GLIBC" | sort -V -C || { echo "$version is newer than GLIBC_$MANYLINUX_GLIBC"; return 1; }
  done
}

# Every library a file needs is one of the policy's.
needed_ok() {
  local objdump=$1 file=$2 library
  for library in $("$objdump" -p "$file" | awk '$1 == "NEEDED" { print $2 }'); do
    [[ " $MANYLINUX_LIBRARIES " == *" $library "* ]] || { echo "needs $library"; return 1; }
    echo "needs $library"
  done
}

# llvm-readelf's view: ELF64 of the machine, of the kind (EXEC/DYN).
readelf_ok() {
  local file=$1 machine=$2 kind=$3 header
  header=$(llvm-readelf-16 --file-header "$file")
  grep -Eq "Class: +ELF64" <<<"$header" && grep -Eq "Machine: +$machine" <<<"$header" &&
    grep -Eq "Type: +$kind" <<<"$header" || { echo "$header"; return 1; }
}

check_linux_archive() {
  local arch=$1 objdump machine
  objdump=$(objdump_for "$arch")
  local dir=$work/linux-$arch
  mkdir -p "$dir"
  tar -xzf "$outdir/machofix-$version-linux-$arch.tar.gz" -C "$dir"
  local release=$dir/machofix-$version-linux-$arch
  expect "README.md and licences shipped" test -s "$release/README.md" -a -s "$release/licences/README" \
    -a -s "$release/licences/LIEF.txt" -a -s "$release/licences/openssl.copyright" -a -s "$release/LICENSE" -a -s "$release/licences/machofix.txt"
  [ "$arch" = x86_64 ] && machine="Advanced Micro Devices X86-64" || machine=AArch64
  local file
  for file in "$release/bin/machofix" "$release/lib/machofix/machofix-lief.so"; do
    echo "$(basename "$file"):"
    case $file in *.so) kind="DYN" ;; *) kind="(EXEC|DYN)" ;; esac
    expect "llvm-readelf: ELF64 $machine" readelf_ok "$file" "$machine" "$kind"
    expect "$objdump -T: no symbol version newer than GLIBC_$MANYLINUX_GLIBC" glibc_versions_ok "$objdump" "$file"
    expect "$objdump -p: needs nothing but glibc" needed_ok "$objdump" "$file"
    expect "no path of the build machine" holds_no_build_path "$file"
  done
  expect "the plugin exports machofix_lief_read_v2" \
    bash -c 'llvm-nm-16 -D --defined-only "$1" | grep -q " T machofix_lief_read_v2$"' _ "$release/lib/machofix/machofix-lief.so"
  expect "the plugin exports nothing of libc++ or LIEF" \
    bash -c '! llvm-nm-16 -D --defined-only "$1" | grep -Ev " machofix_lief_[a-z0-9_]+$| _init$| _fini$"' _ \
    "$release/lib/machofix/machofix-lief.so"
}

# A wheel: its tag, and the binaries and licences of its archive byte for byte.
# LGPL-2.1 section 6(a): the statically linked libplist's complete source goes with the
# binaries: Debian's source package, its .dsc the pinned one, every file it lists whole.
check_lgpl_source() {
  local dir=$1/licences/libplist-source dsc
  dsc=$(find "$dir" -name 'libplist_*.dsc' 2>/dev/null | head -n1)
  [ -n "$dsc" ] && [ "$(sha256sum "$dsc" | cut -d' ' -f1)" = "$(pin_field 2 debian libplist)" ] &&
    (cd "$dir" && awk '/^Checksums-Sha256:/ { listed = 1; next } /^[^ ]/ { listed = 0 } listed { print $1 "  " $3 }' \
      "$(basename "$dsc")" | sha256sum --quiet --strict -c -)
}

check_wheel() {
  local name=$1 platform=$2
  local wheel=$outdir/machofix-$version-py3-none-$platform.whl dir=$work/wheel-$platform
  echo "$(basename "$wheel"):"
  mkdir -p "$dir" && unzip -q -o "$wheel" -d "$dir"
  # One Tag line for each tag of a compressed set (a.b: py3-none-a, py3-none-b).
  expect "WHEEL says Tag: py3-none-${platform//./, py3-none-}, Root-Is-Purelib: false" bash -c \
    'diff <(sed -n "s/^Tag: //p" "$1"/*.dist-info/WHEEL) <(tr . "\n" <<<"$2" | sed "s/^/py3-none-/") &&
     grep -qx "Root-Is-Purelib: false" "$1"/*.dist-info/WHEEL' _ "$dir" "$platform"
  local release
  release=$(find "$work" -maxdepth 2 -type d -name "machofix-$version-$name" | head -n1)
  if [ -z "$release" ]; then
    mkdir -p "$work/$name" && tar -xzf "$outdir/machofix-$version-$name.tar.gz" -C "$work/$name"
    release=$work/$name/machofix-$version-$name
  fi
  # The executable is the wheel's script (installed as bin/machofix), its reader data
  # installed as lib/machofix/: the archive's layout, once each.
  local data=$dir/machofix-$version.data
  expect "the archive's machofix, byte for byte, as the wheel's script" cmp "$data/scripts/machofix" "$release/bin/machofix"
  expect "the archive's machofix-lief.so, byte for byte, as lib/machofix/" cmp "$data/data/lib/machofix/machofix-lief.so" \
    "$release/lib/machofix/machofix-lief.so"
  expect "the archive's licences" diff -r "$dir/machofix/licences" "$release/licences"
  expect "licences/libplist-source: libplist's pinned source package, whole (LGPL-2.1 6a)" check_lgpl_source "$release"
  expect "the script is executable" test -x "$data/scripts/machofix"
  expect "no other copy of the binaries" bash -c '[ -z "$(find "$1" -name "machofix*" -type f -size +100k ! -path "$1/machofix-*.data/*")" ]' _ "$dir"
}

# "NAME STATUS": COMMAND's exit status, its output dropped.
exit_status() {
  local name=$1 status=0
  shift
  "$@" >/dev/null 2>&1 || status=$?
  echo "$name $status"
}

# Runs MACHOFIX (a command, possibly under qemu) on every sample into DIR: the
# pruned model, and the reports of inspect, check and prune without their timings.
run_samples() {
  local dir=$1
  shift
  mkdir -p "$dir"
  local model name
  for model in "$work"/models/*.pte; do
    name=$(basename "$model" .pte)
    # From the models' directory, so that the reports name the same relative paths.
    (cd "$work/models" && {
      exit_status inspect "$@" inspect --json "$dir/$name.inspect.json" "$name.pte"
      exit_status check "$@" check --json "$dir/$name.check.json" "$name.pte"
      exit_status prune "$@" prune --json "$dir/$name.prune.json" -o "$dir/$name.fixed.pte" "$name.pte"
      exit_status verify "$@" verify "$dir/$name.fixed.pte"
    } >"$dir/$name.status")
  done
  local report
  for report in "$dir"/*.json; do
    [ -f "$report" ] || continue
    /usr/bin/python3 - "$report" <<'EOF'
import json, sys
def drop(value):
    if isinstance(value, dict):
        return {k: drop(v) for k, v in value.items() if k != "seconds"}
    if isinstance(value, list):
        return [drop(v) for v in value]
    return value
path = sys.argv[1]
report = drop(json.load(open(path)))
json.dump(report, open(path, "w"), indent=1, sort_keys=True)
EOF
  done
}

run_reference() {
  mkdir -p "$work/models"
  cp "$@" "$work/models/"
  run_samples "$work/run-reference" "$reference"
  expect "the development build repairs $# sample models ($(cd "$work/models" && echo *.pte))" \
    bash -c '! grep -v " 0$" "$1"/*.status | grep -v "check 1$"; ls "$1"/*.fixed.pte' _ "$work/run-reference"
}

# The same files, with the same contents, as the development build's run.
same_as_reference() { diff -r "$work/run-reference" "$1"; }

# The Linux ARCH archive's machofix, run by the command given (qemu) or natively.
check_runs() {
  local arch=$1
  shift
  local tool=$work/linux-$arch/machofix-$version-linux-$arch/bin/machofix
  local how=${1:+under $1}
  expect "${how:-natively}: --version says $version" bash -c '"${@:2}" --version | grep -q "$1"' _ "$version" "$@" "$tool"
  run_samples "$work/run-$arch" "$@" "$tool"
  expect "${how:-natively}: inspect, check, prune, verify of the samples as the development build" \
    same_as_reference "$work/run-$arch"
}

check_venv() {
  local venv=$work/venv wheel=$outdir/machofix-$version-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl
  expect "python3 -m venv (Debian's)" /usr/bin/python3 -m venv "$venv"
  expect "pip install $(basename "$wheel")" "$venv/bin/pip" install --no-index --no-cache-dir "$wheel"
  expect "the installed machofix command is the wheel's executable, its reader lib/machofix/'s" bash -c \
    '"$1/bin/machofix" --version | grep -qx "LIEF reader: $1/bin/../lib/machofix/machofix-lief.so" && cmp "$1/bin/machofix" "$3"' _ \
    "$venv" "$version" "$work/linux-x86_64/machofix-$version-linux-x86_64/bin/machofix"
  run_samples "$work/run-venv" "$venv/bin/machofix"
  expect "the wheel's machofix: the samples as the development build" same_as_reference "$work/run-venv"
  expect "the Python API (machofix.prune) repairs the samples to the same bytes" \
    "$venv/bin/python" - "$work/models" "$work/run-reference" "$work/api" <<'EOF'
import filecmp, os, sys
import machofix
models, reference, out = sys.argv[1:]
os.makedirs(out)
for name in sorted(os.listdir(models)):
    target = os.path.join(out, name.replace(".pte", ".fixed.pte"))
    report = machofix.prune(os.path.join(models, name), output=target)
    assert report.files[0].status in ("pruned", "changed", "unchanged"), report.files[0].status
    assert filecmp.cmp(target, os.path.join(reference, os.path.basename(target)), shallow=False), target
    print(name, report.files[0].status)
EOF
}

check_source_and_formula() {
  local archive=$outdir/machofix-$version.tar.gz formula=$outdir/machofix.rb
  local listing=$work/source-files
  tar -tzf "$archive" | sed "s|^machofix-$version/||" | grep -v '/$' | grep . | LC_ALL=C sort >"$listing"
  git -C "$repo" ls-tree -r --name-only HEAD | grep -v '^Formula/' | LC_ALL=C sort >"$work/source-expected"
  expect "machofix-$version.tar.gz: HEAD's files but Formula/" \
    diff "$work/source-expected" "$listing"
  expect "machofix.rb: ruby -c" ruby -c "$formula"
  expect "Formula/machofix.rb: ruby -c" ruby -c "$repo/Formula/machofix.rb"
  expect "machofix.rb: the url's sha256 is machofix-$version.tar.gz's" \
    grep -qx "  sha256 \"$(sha256sum "$archive" | cut -d' ' -f1)\"" "$formula"
  expect "machofix.rb: the LIEF resource's sha256 is the one pins.lock pins" \
    grep -qx "    sha256 \"$(pin_field 2 tarball LIEF)\"" "$formula"
  expect "machofix.rb: Formula/machofix.rb but for that sha256" \
    bash -c 'diff <(grep -v "^  sha256 " "$1") <(grep -v "^  sha256 " "$2")' _ "$repo/Formula/machofix.rb" "$formula"
}
