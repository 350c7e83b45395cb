#!/usr/bin/env python3
"""Offline unit tests for fetch_corpus.py (stdlib unittest; no network).

Needs npm and openssl (scripts/setup.sh installs both): the certificate tests run
the real npm against a local HTTPS registry (local_registry.py).
Run: python3 tests/corpus/test_fetch_corpus.py
"""
import base64
import hashlib
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # keep the source tree clean
sys.path.insert(0, HERE)
import fetch_corpus as fc  # noqa: E402
import local_registry  # noqa: E402

TEST_CORPUS = os.path.join(os.path.dirname(HERE), "e2e", "test_corpus.py")


def thin(cputype=0x0100000C, filetype=8, size=64):
    return struct.pack("<IiiIIII", 0xFEEDFACF, cputype, 0, filetype, 0, 0, 0).ljust(size, b"\0")


def read(path, mode="rb"):
    with open(path, mode) as f:
        return f.read()


def make_tgz(path, members):
    """members: list of (name, bytes or None for dir, kind)"""
    with tarfile.open(path, "w:gz") as tf:
        for name, data, kind in members:
            ti = tarfile.TarInfo(name)
            if kind == "dir":
                ti.type = tarfile.DIRTYPE
                tf.addfile(ti)
            elif kind == "symlink":
                ti.type = tarfile.SYMTYPE
                ti.linkname = data
                tf.addfile(ti)
            else:
                ti.size = len(data)
                ti.mode = 0o755 if kind == "exe" else 0o644
                tf.addfile(ti, io.BytesIO(data))


class SniffTest(unittest.TestCase):
    def setUp(self):
        self.d = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.d.cleanup()

    def write(self, name, data):
        p = os.path.join(self.d.name, name)
        with open(p, "wb") as f:
            f.write(data)
        return p

    def test_thin_arm64(self):
        r = fc.sniff_macho(self.write("a", thin()))
        self.assertEqual(r["kind"], "thin")
        self.assertEqual(r["arches"], ["arm64"])
        self.assertEqual(r["slices"][0]["filetype"], "MH_BUNDLE")

    def test_fat(self):
        a = thin(0x01000007, 6, 4096)
        b = thin(0x0100000C, 6, 4096)
        hdr = struct.pack(">II", 0xCAFEBABE, 2)
        hdr += struct.pack(">iiIII", 0x01000007, 3, 4096, 4096, 12)
        hdr += struct.pack(">iiIII", 0x0100000C, 0, 8192, 4096, 14)
        data = hdr.ljust(4096, b"\0") + a + b
        r = fc.sniff_macho(self.write("f", data))
        self.assertEqual(r["kind"], "universal")
        self.assertEqual(r["arches"], ["x86_64", "arm64"])

    def test_java_class_is_not_macho(self):
        # 0xcafebabe, minor 0, major 52 (Java 8) -> "nfat_arch" = 52
        data = struct.pack(">IHH", 0xCAFEBABE, 0, 52) + b"\0" * 200
        self.assertIsNone(fc.sniff_macho(self.write("A.class", data)))

    def test_fat_with_bad_slice_is_not_macho(self):
        hdr = struct.pack(">II", 0xCAFEBABE, 1) + struct.pack(">iiIII", 12, 0, 4096, 999999, 14)
        self.assertIsNone(fc.sniff_macho(self.write("bad", hdr.ljust(8192, b"\0"))))

    def test_other_files(self):
        self.assertIsNone(fc.sniff_macho(self.write("t", b"#!/bin/sh\necho hi\n" * 4)))
        self.assertIsNone(fc.sniff_macho(self.write("e", b"\x7fELF" + b"\0" * 60)))


class ExtractTest(unittest.TestCase):
    def setUp(self):
        self.d = tempfile.TemporaryDirectory()
        self.tgz = os.path.join(self.d.name, "p.tgz")

    def tearDown(self):
        self.d.cleanup()

    def test_normal(self):
        make_tgz(self.tgz, [("package/a/b.node", thin(), "exe"), ("package/package.json", b"{}", "file"),
                            ("package/link", "/etc/passwd", "symlink")])
        files, skipped = fc.safe_extract(self.tgz, os.path.join(self.d.name, "out"))
        self.assertEqual(sorted(files), ["a/b.node", "package.json"])
        self.assertEqual(skipped, ["package/link"])
        self.assertFalse(os.path.lexists(os.path.join(self.d.name, "out", "link")))
        self.assertTrue(os.access(os.path.join(self.d.name, "out", "a", "b.node"), os.X_OK))

    def test_traversal_rejected(self):
        for bad in ("package/../../evil", "/etc/evil", "package/a/../../../evil"):
            make_tgz(self.tgz, [(bad, b"x", "file")])
            with self.assertRaises(fc.Failure, msg=bad):
                fc.safe_extract(self.tgz, os.path.join(self.d.name, "out-%d" % len(bad)))
        self.assertFalse(os.path.exists(os.path.join(self.d.name, "evil")))


class CliTest(unittest.TestCase):
    def run_cli(self, *args, env=None):
        e = dict(os.environ)
        e.update(env or {})
        return subprocess.run([sys.executable, os.path.join(HERE, "fetch_corpus.py")] + list(args),
                              capture_output=True, text=True, timeout=120, env=e)

    def test_cache_inside_repo_refused(self):
        r = self.run_cli("--cache", os.path.join(HERE, "cache"))
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("inside the repository", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(HERE, "cache")))

    def test_cached_tarball_needs_no_network(self):
        with tempfile.TemporaryDirectory() as d:
            cache = os.path.join(d, "cache")
            os.makedirs(os.path.join(cache, "tarballs"))
            tgz = os.path.join(cache, "tarballs", "@x+y@1.0.0.tgz")
            make_tgz(tgz, [("package/lib/z.dylib", thin(filetype=6), "file"),
                           ("package/README", b"hi", "file")])
            integ = "sha512-" + base64.b64encode(hashlib.sha512(read(tgz)).digest()).decode()
            pk = os.path.join(d, "packages.json")
            with open(pk, "w") as f:
                json.dump({"packages": [{"name": "@x/y", "version": "1.0.0", "integrity": integ}]}, f)
            # An unusable registry proves nothing is fetched.
            env = {"npm_config_registry": "http://127.0.0.1:9/"}
            r = self.run_cli("--cache", cache, "--packages", pk, env=env)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            m = json.loads(read(os.path.join(cache, "manifest.json"), "r"))
            self.assertEqual(len(m["files"]), 1)
            e = m["files"][0]
            self.assertEqual((e["package"], e["path"], e["kind"], e["arches"]),
                             ("@x/y", "lib/z.dylib", "thin", ["arm64"]))
            self.assertEqual(e["sha256"], hashlib.sha256(thin(filetype=6)).hexdigest())
            # A modified extracted file is restored from the tarball.
            with open(e["cached_path"], "ab") as f:
                f.write(b"junk")
            r = self.run_cli("--cache", cache, "--packages", pk, env=env)
            self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
            self.assertEqual(hashlib.sha256(read(e["cached_path"])).hexdigest(), e["sha256"])
            # A corrupted tarball must be fetched again: with no registry, that is a skip.
            with open(tgz, "ab") as f:
                f.write(b"junk")
            r = self.run_cli("--cache", cache, "--packages", pk, env=env)
            self.assertEqual(r.returncode, 77, r.stdout + r.stderr)
            self.assertTrue(r.stdout.startswith("SKIP: npm registry unreachable: "), r.stdout)
            self.assertEqual(len(r.stdout.strip().splitlines()), 1)


# npm's own words, as npm 9 (Debian 12) and npm 11 print them with --json.
NPM9_REFUSED = """npm ERR! code ECONNREFUSED
npm ERR! syscall connect
npm ERR! errno ECONNREFUSED
npm ERR! FetchError: request to http://127.0.0.1:9/left-pad failed, reason: connect ECONNREFUSED 127.0.0.1:9
{
  "error": {
    "code": "ECONNREFUSED",
    "summary": "FetchError: request to http://127.0.0.1:9/left-pad failed, reason: connect ECONNREFUSED 127.0.0.1:9",
    "detail": "\\nIf you are behind a proxy, please make sure that the\\n'proxy' config is set properly."
  }
}
"""
NPM9_DNS = """npm ERR! code ENOTFOUND
npm ERR! syscall getaddrinfo
npm ERR! errno ENOTFOUND
npm ERR! network request to http://registry.invalid/left-pad failed, reason: getaddrinfo ENOTFOUND registry.invalid
"""
NPM11_TIMEOUT = """npm error code FETCH_ERROR
npm error errno FETCH_ERROR
npm error network timeout at: http://127.0.0.1:44045/left-pad
{
  "error": {
    "code": "FETCH_ERROR",
    "summary": "network timeout at: http://127.0.0.1:44045/left-pad",
    "detail": ""
  }
}
"""
NPM11_CERTIFICATE = """npm error code UNABLE_TO_VERIFY_LEAF_SIGNATURE
npm error errno UNABLE_TO_VERIFY_LEAF_SIGNATURE
npm error request to https://127.0.0.1:39213/left-pad failed, reason: unable to verify the first certificate
{
  "error": {
    "code": "UNABLE_TO_VERIFY_LEAF_SIGNATURE",
    "summary": "request to https://127.0.0.1:39213/left-pad failed, reason: unable to verify the first certificate",
    "detail": ""
  }
}
"""
NPM9_SELF_SIGNED = """npm ERR! code SELF_SIGNED_CERT_IN_CHAIN
npm ERR! errno SELF_SIGNED_CERT_IN_CHAIN
npm ERR! request to https://registry.npmjs.org/left-pad failed, reason: self-signed certificate in certificate chain
"""
NPM11_NOT_FOUND = """npm error code E404
npm error 404 Not Found - GET https://127.0.0.1:39213/left-pad
{"error": {"code": "E404", "summary": "Not Found - GET https://127.0.0.1:39213/left-pad", "detail": ""}}
"""
NPM11_RESET = """npm error code ECONNRESET
npm error network aborted
"""
NPM11_SERVER_ERROR = """npm error code E503
npm error 503 Service Unavailable - GET https://registry.npmjs.org/left-pad
"""


class ClassifyTest(unittest.TestCase):
    """Only DNS failures, refused connections, missing routes and timeouts skip."""

    def test_unreachable(self):
        for output, reason in ((NPM9_REFUSED, "connection refused (ECONNREFUSED)"),
                               (NPM9_DNS, "DNS lookup failed (ENOTFOUND)"), (NPM11_TIMEOUT, "timed out")):
            kind, why = fc.classify_npm_failure(output)
            self.assertEqual(kind, "unreachable", output)
            self.assertTrue(why.startswith(reason), why)
        kind, why = fc.classify_npm_failure(NPM9_REFUSED)
        self.assertIn("request to http://127.0.0.1:9/left-pad failed", why)

    def test_certificate(self):
        for output, code in ((NPM11_CERTIFICATE, "UNABLE_TO_VERIFY_LEAF_SIGNATURE"),
                             (NPM9_SELF_SIGNED, "SELF_SIGNED_CERT_IN_CHAIN")):
            kind, why = fc.classify_npm_failure(output)
            self.assertEqual(kind, "certificate", output)
            self.assertIn(code, why)

    def test_anything_else_is_a_failure(self):
        for output in (NPM11_NOT_FOUND, NPM11_RESET, NPM11_SERVER_ERROR, "", "npm ERR! something odd\n"):
            self.assertEqual(fc.classify_npm_failure(output)[0], "other", output)


# A stand-in for npm: answers `npm pack` as FAKE_NPM_PLAN says, by whether --cafile
# is given ("ok" packs FAKE_NPM_TARBALL), and appends its arguments to FAKE_NPM_LOG.
FAKE_NPM = r"""#!%s
import json, os, shutil, sys, time
args = sys.argv[1:]
with open(os.environ["FAKE_NPM_LOG"], "a") as log:
    log.write(json.dumps(args) + "\n")
plan = json.loads(os.environ["FAKE_NPM_PLAN"])
answer = plan["with cafile" if any(a.startswith("--cafile=") for a in args) else "plain"]
if answer == "hang":
    time.sleep(60)
if answer == "ok":
    destination = args[args.index("--pack-destination") + 1]
    shutil.copy(os.environ["FAKE_NPM_TARBALL"], os.path.join(destination, "package-1.0.0.tgz"))
    print("[]")
    sys.exit(0)
print({"refused": %r, "dns": %r, "timeout": %r, "certificate": %r, "not found": %r}[answer])
sys.exit(1)
""" % (sys.executable, NPM9_REFUSED, NPM9_DNS, NPM11_TIMEOUT, NPM11_CERTIFICATE, NPM11_NOT_FOUND)


class FetchCase(unittest.TestCase):
    """A package list of one package whose tarball is not cached yet."""

    def setUp(self):
        self.d = tempfile.TemporaryDirectory()
        self.cache = os.path.join(self.d.name, "cache")
        self.tarball = os.path.join(self.d.name, "package.tgz")
        make_tgz(self.tarball, [("package/lib/z.dylib", thin(filetype=6), "file")])
        self.packages = os.path.join(self.d.name, "packages.json")
        integrity = "sha512-" + base64.b64encode(hashlib.sha512(read(self.tarball)).digest()).decode()
        with open(self.packages, "w") as f:
            json.dump({"packages": [{"name": "@machofix-test/corpus", "version": "1.0.0",
                                     "integrity": integrity}]}, f)

    def tearDown(self):
        self.d.cleanup()

    def fetch(self, env, *args):
        return subprocess.run([sys.executable, os.path.join(HERE, "fetch_corpus.py"), "--cache", self.cache,
                               "--packages", self.packages] + list(args),
                              capture_output=True, text=True, timeout=300, env=env)

    def last_fetch(self):
        return json.loads(read(os.path.join(self.cache, fc.LAST_FETCH), "r"))

    def assert_skipped(self, result, reason):
        self.assertEqual(result.returncode, 77, result.stdout + result.stderr)
        self.assertEqual(result.stdout.strip().splitlines(), [result.stdout.strip()])
        self.assertTrue(result.stdout.startswith("SKIP: npm registry unreachable: "), result.stdout)
        self.assertIn(reason, result.stdout)
        self.assertEqual(self.last_fetch()["outcome"], "unreachable")

    def assert_failed(self, result, words):
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertNotIn("SKIP", result.stdout)
        self.assertIn(words, result.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.cache, "manifest.json")))
        self.assertEqual(self.last_fetch()["outcome"], "failed")


class FakeNpmTest(FetchCase):
    def setUp(self):
        super().setUp()
        self.bin = os.path.join(self.d.name, "bin")
        os.makedirs(self.bin)
        with open(os.path.join(self.bin, "npm"), "w") as f:
            f.write(FAKE_NPM)
        os.chmod(os.path.join(self.bin, "npm"), 0o755)
        self.log = os.path.join(self.d.name, "npm.log")
        self.system_store = os.path.join(self.d.name, "system-store.pem")
        with open(self.system_store, "w") as f:
            f.write("(the system's CA store)\n")

    def fetch_with(self, plain, with_cafile="ok", *args):
        env = dict(os.environ, PATH=self.bin + os.pathsep + os.environ["PATH"], FAKE_NPM_LOG=self.log,
                   FAKE_NPM_TARBALL=self.tarball, SSL_CERT_FILE=self.system_store,
                   FAKE_NPM_PLAN=json.dumps({"plain": plain, "with cafile": with_cafile}))
        return self.fetch(env, *args)

    def npm_calls(self):
        return [json.loads(line) for line in read(self.log, "r").splitlines()]

    def test_certificate_error_retried_with_the_system_store(self):
        result = self.fetch_with("certificate", "ok")
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        calls = self.npm_calls()
        self.assertEqual(len(calls), 2)
        self.assertFalse(any(a.startswith("--cafile") for a in calls[0]))
        self.assertIn("--cafile=" + self.system_store, calls[1])
        self.assertIn("UNABLE_TO_VERIFY_LEAF_SIGNATURE", result.stderr)
        self.assertIn("trying again with the system's CA store", result.stderr)
        self.assertEqual(len(json.loads(read(os.path.join(self.cache, "manifest.json"), "r"))["files"]), 1)
        self.assertEqual(self.last_fetch()["outcome"], "ok")

    def test_certificate_error_that_persists_fails(self):
        result = self.fetch_with("certificate", "certificate")
        self.assert_failed(result, "also with the system's CA store as npm's cafile (%s)" % self.system_store)
        self.assertEqual(len(self.npm_calls()), 2)

    def test_unreachable_after_the_retry_skips(self):
        self.assert_skipped(self.fetch_with("certificate", "refused"), "connection refused (ECONNREFUSED)")

    def test_refused_dns_and_timeout_skip_with_their_reason(self):
        for plan, reason in (("refused", "connection refused (ECONNREFUSED): FetchError: request to"),
                             ("dns", "DNS lookup failed (ENOTFOUND): network request to"),
                             ("timeout", "timed out: network timeout at")):
            self.assert_skipped(self.fetch_with(plan), reason)
        self.assertEqual(len(self.npm_calls()), 3)  # no retry

    def test_no_answer_within_the_time_limit_skips(self):
        self.assert_skipped(self.fetch_with("hang", "hang", "--timeout", "2"), "timed out: no answer within 2 s")

    def test_other_npm_errors_fail(self):
        self.assert_failed(self.fetch_with("not found"), "E404: Not Found")

    def test_missing_npm_fails(self):
        env = dict(os.environ, PATH=self.bin)
        os.remove(os.path.join(self.bin, "npm"))
        self.assert_failed(self.fetch(env), "npm not found on the PATH")

    def test_missing_package_list_fails(self):
        os.remove(self.packages)
        result = self.fetch_with("ok")
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        self.assertIn("bad package list", result.stderr)


class RealNpmTest(FetchCase):
    """The real npm against a local HTTPS registry whose certificate authority is in
    the "system store" ($SSL_CERT_FILE) or not, as Node.js distributions that trust
    only their bundled roots (--use-bundled-ca: nodejs.org's, NodeSource's) see it."""

    def setUp(self):
        super().setUp()
        self.assertIsNotNone(shutil.which("npm"), "npm is needed (scripts/setup.sh installs it)")
        self.local_ca, self.cert, self.key = local_registry.make_authority(self.d.name, "registry")
        self.other_ca, _, _ = local_registry.make_authority(self.d.name, "other")

    def npm_env(self, system_store):
        home = os.path.join(self.d.name, "home")
        os.makedirs(home, exist_ok=True)
        for name in ("user.npmrc", "global.npmrc"):
            open(os.path.join(home, name), "w").close()
        env = {k: v for k, v in os.environ.items()
               if not k.lower().startswith(("npm_config_", "node_", "ssl_cert", "https_proxy", "http_proxy"))}
        env.update(HOME=home, npm_config_userconfig=os.path.join(home, "user.npmrc"),
                   npm_config_globalconfig=os.path.join(home, "global.npmrc"),
                   npm_config_cache=os.path.join(home, "npm-cache"), npm_config_registry=self.registry.url,
                   NODE_OPTIONS="--use-bundled-ca", SSL_CERT_FILE=system_store, NO_PROXY="127.0.0.1")
        return env

    def test_local_authority_in_the_system_store(self):
        with local_registry.Registry("@machofix-test/corpus", "1.0.0", self.tarball, self.cert, self.key) as self.registry:
            result = self.fetch(self.npm_env(self.local_ca))
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("trying again with the system's CA store (npm cafile=%s)" % self.local_ca, result.stderr)
        self.assertEqual(len(json.loads(read(os.path.join(self.cache, "manifest.json"), "r"))["files"]), 1)

    def test_authority_unknown_to_the_system_store(self):
        with local_registry.Registry("@machofix-test/corpus", "1.0.0", self.tarball, self.cert, self.key) as self.registry:
            result = self.fetch(self.npm_env(self.other_ca))
        self.assert_failed(result, "also with the system's CA store")
        self.assertEqual(self.registry.requests, [])  # no request got past the handshake


class TestCorpusWithoutManifestTest(unittest.TestCase):
    """tests/e2e/test_corpus.py skips only when the last fetch found the registry unreachable."""

    def run_test_corpus(self, last_fetch):
        with tempfile.TemporaryDirectory() as cache:
            if last_fetch:
                with open(os.path.join(cache, fc.LAST_FETCH), "w") as f:
                    json.dump(last_fetch, f)
            return subprocess.run([sys.executable, TEST_CORPUS, "/nonexistent/machofix", os.path.join(cache, "work")],
                                  capture_output=True, text=True, timeout=60,
                                  env=dict(os.environ, MACHOFIX_CACHE=cache))

    def test_unreachable_registry_skips_with_its_reason(self):
        r = self.run_test_corpus({"outcome": "unreachable", "reason": "npm pack x: connection refused (ECONNREFUSED)"})
        self.assertEqual(r.returncode, 77, r.stdout + r.stderr)
        self.assertIn("connection refused (ECONNREFUSED)", r.stdout)

    def test_failed_or_missing_fetch_fails(self):
        for last_fetch in ({"outcome": "failed", "reason": "npm not found on the PATH"}, None):
            r = self.run_test_corpus(last_fetch)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn("no corpus", r.stdout)


if __name__ == "__main__":
    unittest.main()
