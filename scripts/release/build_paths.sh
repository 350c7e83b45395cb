# shellcheck shell=bash
# holds_no_build_path FILE: a release binary names no directory of the machine that
# built it: not the checkout ($repo), nor the release cache, nor a temporary build
# tree of build_release.sh or build_lief.sh, nor the zig cache; a Mach-O file has no
# debug map (stabs naming each object by its path). Any of these makes two builds of
# one commit differ (scripts/check_reproducible.sh). Prints what it found.
holds_no_build_path() {
  local file=$1 found
  if [ ! -f "$file" ] || [ ! -r "$file" ]; then echo "$file: no such readable file" && return 1; fi
  # shellcheck disable=SC2154  # $repo: the checkout, set by the script that sources this
  found=$( (grep -aoF -e "$repo/" -e "/.cache/machofix/" -e "zig-cache/" "$file"
    grep -aoE '/machofix-(release|lief)\.[A-Za-z0-9]{6}/' "$file") | sort | uniq -c)
  [ -z "$found" ] || { echo "$file names build paths: $found"; return 1; }
  # Stabs are Mach-O's: llvm-nm lists none for an ELF file.
  found=$(llvm-nm-16 -a --arch=all "$file" | grep -cE ' - [0-9a-f]{2} [0-9a-f]{4} +(SO|OSO|SOL|BNSYM|FUN) ' || true)
  [ "$found" = 0 ] || { echo "$file has a debug map: $found stabs"; return 1; }
}
