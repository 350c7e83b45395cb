# A pristine Debian 12 root to run the README's commands in, as a new user would on a
# freshly installed machine. Sourced by .ci/run, which calls, in order:
#   root_create                bootstrap (or unpack the cached bootstrap), machine config, copy the sources
#   root_check_unprivileged    setup.sh as a user without root or sudo: one sentence, a failure
#   root_run COMMAND...        COMMAND in the checkout inside the root, as root, clean environment
#   root_destroy               (on every exit path) stop what runs inside, unmount, delete
# Needs root on the host (chroot, mount). Environment:
#   MACHOFIX_CI_WORK   where the root is made (default /var/tmp; needs ~15 GB free)
#   MACHOFIX_CI_KEEP_ROOT=1   keep the root after the run, to look inside
#   XDG_CACHE_HOME     an empty directory here gives a cold run (docs/release.md, Timings)
#
# The caches, in ~/.cache/machofix/ci/ on the host:
#  - the bare result of mmdebstrap (nothing installed into it yet) as a tarball, named
#    after a hash of everything that determines it (suite, variant, sources,
#    architecture, mmdebstrap's version) and rebuilt once it is a week old so that the
#    base packages do not drift far from Debian's. Each run unpacks it into a new
#    directory, so the cached copy is never modified;
#  - what a run downloads or compiles that the next run on this machine would do again
#    the same way, bound into each new root (root_persistent_dirs): apt's downloaded
#    packages and lists, and root's ~/.cache in the root (ccache's objects, the npm
#    corpus, the linker-made fixtures, the release's toolchain, sources and libraries).
#    None of them decides what is installed or built: setup.sh still installs every
#    package into the bare root, and each cache checks what it hands out (apt its
#    packages' hashes, ccache its inputs' hashes, the others their pinned sums or
#    their inputs' hash).

root_suite=bookworm
root_sources=(
  "deb http://deb.debian.org/debian bookworm main"
  "deb http://deb.debian.org/debian bookworm-updates main"
  "deb http://deb.debian.org/debian-security bookworm-security main"
)
root_cache_dir=${XDG_CACHE_HOME:-$HOME/.cache}/machofix/ci
root_cache_days=7
# NAME:PATH: the host's $root_cache_dir/persistent/NAME is bound at PATH in the root
# (and root's ~/.cache in the root, root_mount_persistent).
root_persistent_dirs=(
  apt-archives:/var/cache/apt/archives
  apt-lists:/var/lib/apt/lists
)
root_checkout=/src/machofix  # the sources' ../shared is /src/shared, as beside a clone
root_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
root=""

root_log() { echo "pristine-root: $*"; }

# mmdebstrap from Debian's own packages, installed on the host if missing.
root_host_tools() {
  command -v mmdebstrap >/dev/null && return
  root_log "installing mmdebstrap on the host (apt-get)"
  local install=(env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends mmdebstrap)
  "${install[@]}" >/dev/null 2>&1 || { apt-get update -q >/dev/null && "${install[@]}" >/dev/null; }
}

# Prints the path of the cached bare bootstrap tarball, making it when missing or old.
root_bootstrap_tarball() {
  local key tarball
  key=$( (mmdebstrap --version; dpkg --print-architecture; echo "$root_suite minbase"; printf '%s\n' "${root_sources[@]}") |
    sha256sum | cut -c1-16)
  tarball=$root_cache_dir/debian12-minbase-$key.tar
  mkdir -p "$root_cache_dir" || return
  (
    flock 9  # one bootstrap at a time; the others then use it
    if [ -n "$(find "$tarball" -mtime -"$root_cache_days" 2>/dev/null)" ]; then
      root_log "bare Debian 12 root from the cache: $tarball"
    else
      root_log "bootstrapping Debian 12 (mmdebstrap --variant=minbase; log: $tarball.log)"
      mmdebstrap --mode=root --variant=minbase --format=tar "$root_suite" "$tarball.partial" "${root_sources[@]}" \
        >"$tarball.log" 2>&1 || { tail -n 20 "$tarball.log"; exit 1; }
      mv "$tarball.partial" "$tarball" &&
        find "$root_cache_dir" -name 'debian12-minbase-*.tar' ! -path "$tarball" -delete
    fi
  ) 9>"$root_cache_dir/bootstrap.lock" >&2 || return
  echo "$tarball"
}

# The shared files (ExecuTorch samples) the tests look for beside the checkout, here
# or, for a local clone, beside the repository it was cloned from. Nothing if none.
root_find_shared() {
  local origin
  if [ -d ../shared ]; then
    (cd ../shared && pwd)
    return
  fi
  origin=$(git config --get remote.origin.url 2>/dev/null || true)
  origin=${origin#file://}
  if [ -n "$origin" ] && [ -d "$origin/../shared" ]; then
    (cd "$origin/../shared" && pwd)
  fi
}

# The working tree's files (tracked and new, not ignored; no build directory) and .git.
root_copy_checkout() {
  local destination=$1 file
  mkdir -p "$destination" || return
  git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' file; do [ ! -e "$file" ] || printf '%s\0' "$file"; done |
    tar --null -T - -cf - | tar -xf - -C "$destination" || return
  [ ! -d .git ] || cp -a .git "$destination/"
}

# What an administrator configures on a new machine: the name server and the local
# certificate authorities (Debian's ca-certificates adds those to the system store
# when setup.sh installs it).
root_machine_config() {
  cat /etc/resolv.conf >"$root/etc/resolv.conf" || return
  mkdir -p "$root/usr/local/share/ca-certificates" || return
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
  fi
}

root_mount() {
  local type=$1 source=$2 target=$root$3
  if [ "$type" = bind ]; then
    mount --bind "$source" "$target" || return
  else
    mount -t "$type" "$source" "$target" || return
  fi
  mount --make-private "$target"  # nothing mounted below it reaches the host
}

# (.ci/run does not stop at the first failing command: each step says how it went.)
root_create() {
  local tarball shared
  root_host_tools || return
  tarball=$(root_bootstrap_tarball) || return
  root=$(mktemp -d "${MACHOFIX_CI_WORK:-/var/tmp}/machofix-pristine-root.XXXXXX") || return
  root_log "unpacking into $root"
  tar --numeric-owner --xattrs --xattrs-include='*' -xf "$tarball" -C "$root" || return
  root_machine_config || return
  root_copy_checkout "$root$root_checkout" || return
  shared=$(root_find_shared)
  if [ -n "$shared" ]; then
    root_log "copying $shared to $(dirname "$root_checkout")/shared"
    cp -r "$shared" "$root$(dirname "$root_checkout")/shared" || return
  else
    root_log "NOTE: no ../shared beside this clone or its origin: the tests that need the ExecuTorch samples will say they are skipped"
  fi
  root_mount proc proc /proc && root_mount sysfs sysfs /sys && root_mount bind /dev /dev &&
    root_mount bind /dev/pts /dev/pts && root_mount tmpfs tmpfs /dev/shm && root_mount_persistent
}

# The caches a run leaves to the next (see the top). apt keeps what it downloads
# (Binary::apt::APT::Keep-Downloaded-Packages is true unless configured otherwise; the
# bare root configures nothing).
root_mount_persistent() {
  local entry source target
  for entry in "${root_persistent_dirs[@]}" "root-home-cache:$(root_home root)/.cache"; do
    source=$root_cache_dir/persistent/${entry%%:*}
    target=${entry#*:}
    mkdir -p "$source" "$root$target" && root_mount bind "$source" "$target" || return
  done
  root_log "caches of earlier runs: $(du -sh "$root_cache_dir/persistent" 2>/dev/null | cut -f1) in $root_cache_dir/persistent"
}

# USER's home directory inside the root.
root_home() { chroot "$root" getent passwd "$1" | cut -d: -f6; }

# COMMAND run in the checkout inside the root with a clean environment; as USER when
# the first argument is --user USER (the checkout in their home), else as root.
root_run() {
  local user=root home checkout=$root_checkout
  if [ "$1" = --user ]; then
    user=$2
    checkout=$(root_home "$user")/machofix
    shift 2
  fi
  home=$(root_home "$user")
  # In the background, so that a signal to .ci/run is handled at once (its trap
  # then stops what runs inside), not once the command is over.
  chroot --userspec="$user:$user" "$root" /usr/bin/env -i PATH="$root_path" HOME="$home" LANG=C.UTF-8 \
    $(env | grep -E '^MACHOFIX_CI_[A-Z_]+=' || true) \
    /bin/bash -c 'cd "$1" && shift && "$@"' bash "$checkout" "$@" &
  wait $!
}

# Before anything is installed: a user who is neither root nor has sudo gets one
# sentence naming what to do, and a failure.
root_check_unprivileged() {
  local output status=0
  local home
  chroot "$root" useradd --create-home --shell /bin/bash newcomer || return
  home=$(root_home newcomer)
  cp -a "$root$root_checkout" "$root$home/machofix" && chroot "$root" chown -R newcomer:newcomer "$home/machofix" ||
    return
  output=$(root_run --user newcomer scripts/setup.sh 2>&1) || status=$?
  chroot "$root" userdel --remove newcomer 2>/dev/null
  printf '  | %s\n' "$output"
  if [ "$status" -eq 0 ]; then
    root_log "FAILED: setup.sh succeeded for a user without root or sudo"
  elif [ "$(printf '%s\n' "$output" | grep -c .)" -ne 1 ]; then
    root_log "FAILED: setup.sh printed more than one line"
  elif ! grep -q "as root" <<<"$output" || ! grep -q "apt-get install" <<<"$output"; then
    root_log "FAILED: the sentence does not say to run as root or what to install"
  else
    return 0
  fi
  return 1
}

# Every process whose root directory is the pristine root (ours: started by root_run).
root_processes() {
  local link
  for link in /proc/[0-9]*/root; do
    [ "$(readlink "$link" 2>/dev/null)" = "$root" ] && basename "$(dirname "$link")"
  done
  return 0
}

# Mount points at or below the root, deepest first (ours, and any a test left).
root_mounts() {
  awk -v root="$root" '$5 == root || index($5, root "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r
}

root_destroy() {
  [ -n "$root" ] && [ -d "$root" ] || return 0
  local pids mount
  pids=$(root_processes)
  if [ -n "$pids" ]; then
    root_log "stopping what still runs inside: $(echo $pids)"
    kill -TERM $pids 2>/dev/null || true
    sleep 3
    pids=$(root_processes)
    [ -z "$pids" ] || kill -KILL $pids 2>/dev/null || true
  fi
  for mount in $(root_mounts); do
    umount "$mount" 2>/dev/null || umount --lazy "$mount"
  done
  if [ -n "$(root_mounts)" ]; then
    root_log "WARNING: still mounted below $root, so it is left in place: $(root_mounts | tr '\n' ' ')"
  elif [ "${MACHOFIX_CI_KEEP_ROOT:-0}" = 1 ]; then
    root_log "kept: $root"
  else
    local start=$SECONDS
    rm -rf --one-file-system "$root"
    root_log "removed $root in $((SECONDS - start)) s"
  fi
  root=""
}
