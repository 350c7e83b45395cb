#!/usr/bin/env bash
# Checks the macOS archive that scripts/build_release.sh made, with machofix itself
# (the Linux build) and with LLVM's tools as the independent reader:
#
#   scripts/check_macos_release.sh OUTDIR/machofix-VERSION-macos.tar.gz [MACHOFIX]
#   scripts/check_macos_release.sh --build OUTDIR [MACHOFIX]   (builds the macOS targets first)
#
# For the executable and the LIEF reader, universal and each thin slice:
#   - llvm-lipo-16: the universal files hold exactly arm64 and x86_64;
#   - llvm-objdump-16 --private-headers: a Mach-O executable / dylib for macOS 11.0
#     of the right CPU, with a code signature; --dylibs-used: it depends on nothing
#     but /usr/lib/libSystem.B.dylib, /usr/lib/libc++.1.dylib and system frameworks;
#   - machofix verify: every slice's signature valid (unsigned does not count);
#   - machofix check: no finding; machofix inspect: the same dependencies;
#   - machofix prune --dry-run: nothing to remove;
#   - the reader exports the plugin interface (core/lief/lief_plugin_abi.h).
# Ends with "N passed, M failed"; exit status 1 if anything failed.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
usage="usage: $0 RELEASE.tar.gz [MACHOFIX] | --build OUTDIR [MACHOFIX]"
if [ "${1:-}" = --build ]; then
  [ $# -ge 2 ] && [ $# -le 3 ] || { echo "$usage" >&2; exit 2; }
  build_start=$(date +%s)
  "$repo/scripts/build_release.sh" "$2" macos-aarch64 macos-x86_64
  echo "check_macos_release: scripts/build_release.sh took $(($(date +%s) - build_start)) s"
  version=$(sed -n 's/^project(machofix VERSION \([0-9.]*\).*/\1/p' "$repo/CMakeLists.txt")
  set -- "$2/machofix-$version-macos.tar.gz" "${@:3}"
fi
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "$usage" >&2; exit 2; }
tarball=$1
machofix=${2:-$repo/build/machofix}
python=/usr/bin/python3  # Debian's, for reading the JSON reports
work=$(mktemp -d "${TMPDIR:-/tmp}/machofix-check-macos.XXXXXX")
trap 'rm -rf "$work"' EXIT

source "$repo/scripts/release/expect.sh"
source "$repo/scripts/release/build_paths.sh"

tar -xzf "$tarball" -C "$work"
release=$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'machofix-*-macos')
[ -n "$release" ] || { echo "check_macos_release: $tarball holds no machofix-*-macos directory" >&2; exit 1; }
echo "check_macos_release: $(basename "$release") with $machofix"
expect "README.md and licences shipped" test -s "$release/README.md" -a -s "$release/licences/README" -a -s "$release/licences/LIEF.txt"

# The files to check: the two shipped universal files and their thin slices.
executable=$release/bin/machofix
reader=$release/lib/machofix/machofix-lief.so
files=()
for universal in "$executable" "$reader"; do
  expect "$(basename "$universal"): universal with arm64 and x86_64" \
    bash -c '[ "$(llvm-lipo-16 -archs "$1" | tr " " "\n" | sort | xargs)" = "arm64 x86_64" ]' _ "$universal"
  files+=("$universal")
  for arch in arm64 x86_64; do
    if llvm-lipo-16 -thin "$arch" "$universal" -output "$work/$(basename "$universal").$arch" 2>"$work/out"; then
      files+=("$work/$(basename "$universal").$arch")
    else
      failure "$(basename "$universal"): no $arch slice to check"
    fi
  done
done

# llvm-objdump's view of one thin file: file type, CPU, platform, signature.
objdump_headers() {
  local file=$1 filetype=$2 cpu=$3
  local headers
  headers=$(llvm-objdump-16 --macho --private-headers "$file")
  grep -Eq "^ *MH_MAGIC_64 +$cpu .* $filetype " <<<"$headers" || { echo "not a $cpu $filetype"; return 1; }
  grep -A3 LC_BUILD_VERSION <<<"$headers" | grep -q 'platform macos' || { echo "no LC_BUILD_VERSION for macOS"; return 1; }
  grep -A5 LC_BUILD_VERSION <<<"$headers" | grep -q 'minos 11.0' || { echo "not for macOS 11.0"; return 1; }
  grep -q LC_CODE_SIGNATURE <<<"$headers" || { echo "no LC_CODE_SIGNATURE"; return 1; }
}

# Every library it loads (not its own id) is macOS's own.
objdump_dependencies() {
  local file=$1 own_id
  own_id=$(llvm-objdump-16 --macho --dylib-id "$file" | sed -n '2p')
  llvm-objdump-16 --macho --dylibs-used "$file" | tail -n +2 | sed 's/^[[:space:]]*//; s/ (compatibility.*//' |
    while read -r dylib; do
      [ "$dylib" = "$own_id" ] && continue
      case $dylib in
        /usr/lib/libSystem.B.dylib | /usr/lib/libc++.1.dylib | /System/Library/Frameworks/*) echo "uses $dylib" ;;
        *) echo "depends on $dylib, not a system library"; return 1 ;;
      esac
    done
}

# machofix's JSON report of one file, read by $python with a condition on it.
json_check() {
  local report=$1 condition=$2
  "$python" - "$report" "$condition" <<'EOF'
import json, sys
report = json.load(open(sys.argv[1]))
files = report["files"]
slices = [s for f in files for s in (f.get("macho") or {}).get("slices", [])]
ok = eval(sys.argv[2], {"report": report, "files": files, "slices": slices})
if not ok:
    print(json.dumps(report, indent=1)[:3000])
sys.exit(0 if ok else 1)
EOF
}

system_library='d["install_name"] in ("/usr/lib/libSystem.B.dylib", "/usr/lib/libc++.1.dylib") or d["install_name"].startswith("/System/Library/Frameworks/")'
for file in "${files[@]}"; do
  name=$(basename "$file")
  echo "$name:"
  case $name in machofix-lief.so*) filetype=DYLIB ;; *) filetype=EXECUTE ;; esac
  case $name in *.arm64) cpus=(ARM64) ;; *.x86_64) cpus=(X86_64) ;; *) cpus=() ;; esac
  for cpu in "${cpus[@]}"; do
    expect "llvm-objdump: $cpu $filetype for macOS 11.0, signed" objdump_headers "$file" "$filetype" "$cpu"
  done
  expect "llvm-objdump: only system libraries" objdump_dependencies "$file"
  expect "no path of the build machine, no debug map" holds_no_build_path "$file"
  expect "machofix verify: exit 0" "$machofix" verify --json "$work/verify.json" "$file"
  expect "machofix verify: every slice's signature valid" \
    json_check "$work/verify.json" 'slices and all(s["signature"]["status"] == "valid" for s in slices)'
  expect "machofix check: no finding" "$machofix" check --json "$work/check.json" "$file"
  expect "machofix check: report without findings" json_check "$work/check.json" 'report["findings"] == []'
  expect "machofix inspect: exit 0" "$machofix" inspect --json "$work/inspect.json" "$file"
  expect "machofix inspect: only system libraries, each used" json_check "$work/inspect.json" \
    "slices and all(($system_library) and not d['removed'] for s in slices for d in s['dylibs'])"
  expect "machofix prune --dry-run: exit 0" "$machofix" prune --dry-run --json "$work/prune.json" "$file"
  expect "machofix prune --dry-run: nothing to remove" json_check "$work/prune.json" \
    'files[0]["status"] == "unchanged" and report["summary"]["dylibs_removed"] == 0'
  if [ "$filetype" = DYLIB ]; then
    expect "install name @rpath/machofix-lief.so (no path of the build machine)" \
      bash -c '! llvm-objdump-16 --macho --dylib-id "$1" | tail -n +2 | grep -vqx "@rpath/machofix-lief.so"' _ "$file"
    expect "exports the plugin interface machofix_lief_read_v2" \
      bash -c 'llvm-nm-16 -gU --arch=all "$1" | grep -c " T _machofix_lief_read_v2$" | grep -qx "${2}"' _ "$file" \
      "$([ ${#cpus[@]} -eq 0 ] && echo 2 || echo 1)"
  fi
done

echo "check_macos_release: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
