# shellcheck shell=bash
# Reads pins.lock, the repository's one list of pinned inputs (its header says what
# each kind of line holds). Sourced by scripts/build_release.sh and
# scripts/build_lief.sh; needs only awk.
# MACHOFIX_PINS_LOCK: another lock, for the tests' stand-ins of what cannot be reached.
pins_lock=${MACHOFIX_PINS_LOCK:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/pins.lock}

# pin KIND NAME: that line's "VERSION HASH [WHERE]"; fails, saying so, when there is none.
pin() {
  awk -v kind="$1" -v name="$2" '
    $1 == kind && $2 == name { $1 = ""; $2 = ""; sub(/^ +/, ""); print; found = 1 }
    END { exit !found }' "$pins_lock" || { echo "pins.lock: no $1 pin named $2" >&2; return 1; }
}

# pin_field N KIND NAME: the Nth of VERSION (1), HASH (2), WHERE (3).
pin_field() {
  local fields
  fields=$(pin "$2" "$3") || return
  awk -v n="$1" '{ print $n }' <<<"$fields"
}

# debian_pins WHERE: "NAME VERSION SHA256" of each Debian source package pinned for
# WHERE (all, linux), in the lock's order.
debian_pins() {
  awk -v where="$1" '$1 == "debian" && $5 == where { print $2, $3, $4 }' "$pins_lock"
}
