#!/usr/bin/env python3
"""Offline unit tests for fetch_corpus.py (stdlib unittest; no network).

Run: python3 tests/corpus/test_fetch_corpus.py
"""
import base64
import hashlib
import io
import json
import os
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


if __name__ == "__main__":
    unittest.main()
