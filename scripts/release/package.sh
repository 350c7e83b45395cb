# shellcheck shell=bash
# The release's archives and wheels, from the thin binaries each target's build left
# in $work/thin/TARGET. Sourced by scripts/build_release.sh, which defines repo,
# cache, work, outdir, version, host_machofix, say, die, logged.

# Reproducible archives: fixed owner, order, times and modes (644, or 755 where the
# owner may execute: the builder's umask decides what the staged files got), and a
# gzip header with no name or time.
reproducible_tar_gz() {  # PARENT NAME OUT: PARENT/NAME as OUT
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 --mode=u=rwX,go=rX -C "$1" -cf - "$2" |
    gzip -n -9 >"$3.part"
  mv "$3.part" "$3"
}

write_tarball() {  # DIRECTORY (in $work) -> $outdir/DIRECTORY.tar.gz
  reproducible_tar_gz "$work" "$1" "$outdir/$1.tar.gz"
  say "wrote $1.tar.gz"
}

# What every archive holds besides the binaries: the manual and the licence of
# everything linked in, from the prefix of target $2, into stage $1.
stage_documents() {
  local stage=$1 target=$2
  mkdir -p "$stage/licences"
  cp "$repo/README.md" "$repo/LICENSE" "$stage/"
  cp "$repo/LICENSE" "$stage/licences/machofix.txt"  # the wheels carry licences/ only
  cp -r "$repo/docs" "$stage/"  # the README links the manual there
  cp -a "$cache/prefix-$target/share/licenses/." "$stage/licences/"
  cp -a "$cache/prefix-$target/lief/share/licenses/." "$stage/licences/"
  cp -a "$cache/host-headers/share/licenses/." "$stage/licences/"
  cp "$cache/zig-$ZIG_VERSION/package/lib/libcxx/LICENSE.TXT" "$stage/licences/llvm-libc++.txt"
  # libplist is LGPL-2.1+ and linked in statically: its section 6(a) asks that the
  # library's complete source go with the binaries. Debian's source package, as built.
  mkdir -p "$stage/licences/libplist-source"
  cp "$cache/src/libplist"/libplist_* "$stage/licences/libplist-source/"
}

# licences/README: what is linked in and under which licence; $1 the stage, $2 what
# the binaries are, $3 what they load at run time.
licence_readme() {
  local libraries
  libraries=$(printf '%s; ' "${DEBIAN_SOURCES[@]%% *}")
  [[ $2 == *Linux* ]] && libraries+="openssl (libcrypto); "
  cat >"$1/licences/README" <<EOF
machofix $version $2, cross-built on Debian 12 with zig $ZIG_VERSION
($ZIG_PACKAGE from npm). machofix itself: machofix.txt (BSD-3-Clause). Linked in
statically, with the licence of each:
  LIEF 0.9.0 (reader plugin only): LIEF.txt (the Apache License 2.0); mbedTLS 2.6.0's
    SHA-256, compiled into LIEF: mbedTLS-2.6.0.txt (it names the Apache License 2.0,
    whose text is LIEF.txt)
  from Debian 12's source packages: *.copyright (Debian's copyright files):
    $libraries
    libplist (the LGPL 2.1 or later) is linked in statically. As its section 6(a)
    asks, its complete source goes with these binaries: libplist-source/, Debian's
    source package as built (dpkg-source -x the .dsc). The work that uses it is
    machofix, whose source is the release's machofix-$version.tar.gz (BSD-3-Clause):
    scripts/build_release.sh there builds this library from that source package and
    links it in, so a changed libplist can be built and linked in the same way.
  CLI11, spdlog, fmt, flatbuffers, toml++, nlohmann-json (headers compiled in):
    lib*-dev.copyright, nlohmann-json3-dev.copyright
  LLVM libc++/libc++abi (zig's): llvm-libc++.txt (Apache-2.0 WITH LLVM-exception)
$3
EOF
}

# The universal macOS binaries: each thin file signed (zig's linker signs arm64
# files; x86_64 ones get machofix's linker-style ad hoc signature), joined, checked.
package_macos() {
  local target
  for target in macos-aarch64 macos-x86_64; do
    logged "$work/sign-$target.log" "$host_machofix" sign --in-place "$work/thin/$target/machofix" \
      "$work/thin/$target/machofix-lief.so"
  done
  local name=machofix-$version-macos
  local stage=$work/$name
  mkdir -p "$stage/bin" "$stage/lib/machofix"
  llvm-lipo-16 -create "$work/thin/macos-aarch64/machofix" "$work/thin/macos-x86_64/machofix" \
    -output "$stage/bin/machofix"
  llvm-lipo-16 -create "$work/thin/macos-aarch64/machofix-lief.so" "$work/thin/macos-x86_64/machofix-lief.so" \
    -output "$stage/lib/machofix/machofix-lief.so"
  logged "$work/verify.log" "$host_machofix" verify "$stage/bin/machofix" "$stage/lib/machofix/machofix-lief.so"
  stage_documents "$stage" macos-aarch64
  licence_readme "$stage" "for macOS 11.0 and later (universal: arm64, x86_64)" \
    "The only libraries loaded at run time are macOS's own (/usr/lib/libSystem.B.dylib)."
  write_tarball "$name"
  make_wheel "$stage" macosx_11_0_universal2
}

package_linux() {
  local target=$1 arch
  arch=$(target_arch "$target")
  local name=machofix-$version-linux-$arch
  local stage=$work/$name
  mkdir -p "$stage/bin" "$stage/lib/machofix"
  cp "$work/thin/$target/machofix" "$stage/bin/"
  cp "$work/thin/$target/machofix-lief.so" "$stage/lib/machofix/"
  stage_documents "$stage" "$target"
  licence_readme "$stage" "for Linux on $arch with glibc $GLIBC_MIN or later" \
    "The only libraries loaded at run time are glibc's (libc, libm, libdl, libpthread, librt)."
  write_tarball "$name"
  # PEP 600's tag and its manylinux2014 alias, one compressed tag set: pip 20.3 and
  # later read the first, pip 19.3 to 20.2 the second.
  make_wheel "$stage" "manylinux_${GLIBC_MIN/./_}_$arch.manylinux2014_$arch"
}

# The wheel of a stage's binaries, tagged py3-none-PLATFORM (python/setup.py), built
# from a copy of the package so that the checkout is not written to.
make_wheel() {
  local stage=$1 platform=$2
  local source=$work/wheel-$platform binaries=$work/wheel-$platform-binaries
  mkdir -p "$source" "$binaries"
  cp -r "$repo/python" "$source/python"
  rm -rf "$source/python/build" "$source/python"/*.egg-info
  cp "$repo/CMakeLists.txt" "$source/"
  cp "$stage/bin/machofix" "$stage/lib/machofix/machofix-lief.so" "$binaries/"
  # python/setup.py: the executable as the wheel's script, its reader as lib/machofix/
  # data, the licences in the package (machofix/licences/).
  # A wheel records each file's mode: the same whatever the builder's umask and the
  # checkout's modes.
  chmod -R u=rwX,go=rX "$source" "$binaries" "$stage/licences"
  # The files setuptools writes (build/lib's copies, METADATA, RECORD) take the
  # umask's modes: a builder with umask 077 made 0600 members (scripts/check_reproducible.sh).
  (umask 022 && logged "$work/wheel-$platform.log" env MACHOFIX_BUILD_DIR="$binaries" \
    MACHOFIX_WHEEL_PLATFORM="$platform" MACHOFIX_LICENCE_DIR="$stage/licences" \
    /usr/bin/python3 -m pip wheel --no-build-isolation --no-deps --no-index "$source/python" -w "$work/wheels-$platform")
  local wheel=("$work/wheels-$platform"/machofix-"$version"-py3-none-"$platform".whl)
  [ -f "${wheel[0]}" ] || die "no wheel machofix-$version-py3-none-$platform.whl: $(ls "$work/wheels-$platform")"
  mv "${wheel[0]}" "$outdir/"
  say "wrote $(basename "${wheel[0]}")"
}

write_checksums() {
  (cd "$outdir" && find . -maxdepth 1 -type f \( -name '*.tar.gz' -o -name '*.whl' -o -name machofix.rb \) -printf '%f\n' |
    LC_ALL=C sort |
    xargs -r sha256sum >SHA256SUMS.part && mv SHA256SUMS.part SHA256SUMS)
}

# The release's source archive: the commit's tracked files (git archive of HEAD, not
# the working tree; without Formula/, whose sha256 line names this archive). The
# formula builds the model its test repairs from these sources. Reproducible: the same
# commit gives the same bytes.
package_source() {
  local name=machofix-$version
  local stage=$work/source
  mkdir -p "$stage"
  git -C "$repo" archive --format=tar --prefix="$name/" HEAD -- . ':(exclude)Formula' | tar -xf - -C "$stage"
  reproducible_tar_gz "$stage" "$name" "$outdir/$name.tar.gz"
  say "wrote $name.tar.gz"
  logged "$work/formula.log" "$repo/scripts/release/formula.sh" "$repo/Formula/machofix.rb" "$outdir/$name.tar.gz" \
    "$outdir/machofix.rb"
  say "wrote machofix.rb"
}
