#!/usr/bin/env python3
"""Writes the seed corpora of fuzz_tbd and fuzz_plist (run by fuzz/run_fuzzers.sh at
run time; nothing generated is committed):

    make_text_seeds.py OUTDIR      ->  OUTDIR/tbd/*, OUTDIR/plist/*

The stubs and Info.plists are the project's own fixtures: tests/fixtures/tbd/*.tbd,
the sysroot and link-only stubs of tests/app/make_app_fixtures.py (v4 with inlined
libraries, v3, v5 JSON) and the Info.plist of each of its applications, written by it
(XML) and in binary as Xcode may write it. A few small stubs add what no fixture has
(versions 1 and 2, v5 with inlined and re-exported libraries), and a few property
lists every node type, so that each syntax and each branch starts from a valid file.
"""

import json
import plistlib
import shutil
import sys
import tempfile
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "app"))
sys.dont_write_bytecode = True  # keep __pycache__ out of the source tree

import make_app_fixtures as app  # noqa: E402  (its constants; nothing is built)

# What no fixture stub has: versions 1 and 2, and a v5 file with everything.
V1 = """---
archs:           [ i386, x86_64 ]
platform:        macosx
install-name:    /usr/lib/libold.dylib
exports:
  - archs:           [ i386, x86_64 ]
    allowed-clients: [ Client ]
    re-exports:      [ /usr/lib/libinner.dylib ]
    symbols:         [ _old_function ]
    objc-classes:    [ _OldClass ]
    objc-ivars:      [ _OldClass._field ]
    weak-def-symbols: [ _old_weak ]
    thread-local-symbols: [ _old_tlv ]
...
"""
V2 = """--- !tapi-tbd-v2
archs:           [ armv7, arm64 ]
platform:        ios
flags:           [ flat_namespace ]
install-name:    /usr/lib/libtwo.dylib
current-version: 2.1.3
compatibility-version: 2
exports:
  - archs:           [ armv7, arm64 ]
    symbols:         [ _two, '_OBJC_EHTYPE_$_TwoError' ]
    objc-classes:    [ _TwoClass ]
...
"""
V3_ZIPPERED = """--- !tapi-tbd-v3
archs:           [ i386, x86_64, arm64 ]
platform:        zippered
install-name:    '/System/Library/Frameworks/Three.framework/Versions/A/Three'
current-version: 1319.100.3
swift-abi-version: 5
exports:
  - archs:           [ x86_64, arm64 ]
    symbols:         [ _three ]
    objc-classes:    [ ThreeClass ]
    objc-eh-types:   [ ThreeError ]
    objc-ivars:      [ ThreeClass.count ]
...
"""
V5 = {
    "tapi_tbd_version": 5,
    "main_library": {
        "target_info": [{"target": "x86_64-macos", "min_deployment": "10.14"},
                        {"target": "arm64-macos", "min_deployment": "11"}],
        "install_names": [{"name": "/System/Library/Frameworks/Five.framework/Five"}],
        "current_versions": [{"version": "5.4.3"}],
        "compatibility_versions": [{"version": "1.1"}],
        "reexported_libraries": [{"names": ["/usr/lib/libarm.dylib"]},
                                 {"targets": ["arm64-<1>"], "names": ["/usr/lib/libx.dylib"]}],
        "exported_symbols": [
            {"text": {"global": ["_everywhere"], "weak": ["_weak_five"]},
             "data": {"thread_local": ["_tlv"], "objc_class": ["FiveClass"],
                      "objc_eh_type": ["FiveError"], "objc_ivar": ["FiveClass.value"]}},
            {"targets": ["arm64-macos"], "text": {"global": ["_arm64_only"]}}],
        "reexported_symbols": [{"targets": ["x86_64-macos"], "data": {"global": ["_re_x86"]}}],
    },
    "libraries": [{
        "target_info": [{"target": "arm64-macos"}],
        "install_names": [{"name": "/usr/lib/libarm.dylib"}],
        "exported_symbols": [{"text": {"global": ["_from_inlined"]}}],
    }],
}


def tbd_seeds(out):
    out.mkdir(parents=True, exist_ok=True)
    for path in sorted((ROOT / "tests" / "fixtures" / "tbd").glob("*.tbd")):
        shutil.copyfile(path, out / f"fixture-{path.name}")
    for rel, text in app.SYSROOT_FILES.items():
        (out / f"sysroot-{Path(rel).name}").write_text(text)
    (out / "twin-Metal.tbd").write_text(app.METAL_TBD_V4_TWIN.format(path="Metal.tbd"))
    with tempfile.TemporaryDirectory() as scratch:
        builder = app.Builder(scratch)  # writes its link-only stubs; builds nothing
        for key, path in sorted(builder.gen.items()):
            shutil.copyfile(path, out / f"gen-{key}.tbd")
    (out / "v1.tbd").write_text(V1)
    (out / "v2.tbd").write_text(V2)
    (out / "v3-zippered.tbd").write_text(V3_ZIPPERED)
    (out / "v5.tbd").write_text(json.dumps(V5, indent=1) + "\n")
    (out / "v5-compact.tbd").write_text(json.dumps(V5, separators=(",", ":")))


def plist_seeds(out):
    out.mkdir(parents=True, exist_ok=True)
    for name, bundle in sorted(app.APPS.items()):
        if not bundle.exe:
            continue
        xml = app.app_plist(bundle.exe, name[:-4])
        (out / f"{name}.xml").write_bytes(xml)
        (out / f"{name}.bin").write_bytes(plistlib.dumps(plistlib.loads(xml), fmt=plistlib.FMT_BINARY))
    # Every node type libplist reads, around the key the bundle reader wants.
    rich = {
        "CFBundleExecutable": "R&D <App> \u00e9",
        "CFBundleVersion": "1.0",
        "LSRequiresIPhoneOS": True,
        "NSHighResolutionCapable": False,
        "UIDeviceFamily": [1, 2, -7, 2**63 - 1],
        "Ratio": 0.5,
        "Icon": b"\x00\x01\x02\xff",
        "Built": datetime(2026, 1, 2, 3, 4, 5),
        "CFBundleDocumentTypes": [{"CFBundleTypeName": "Model", "LSItemContentTypes": ["org.pytorch.pte"]}],
    }
    (out / "rich.xml").write_bytes(plistlib.dumps(rich))
    (out / "rich.bin").write_bytes(plistlib.dumps(rich, fmt=plistlib.FMT_BINARY))
    (out / "uid.bin").write_bytes(plistlib.dumps({"CFBundleExecutable": "A", "U": plistlib.UID(3)},
                                                 fmt=plistlib.FMT_BINARY))
    (out / "not-a-dict.xml").write_bytes(plistlib.dumps(["CFBundleExecutable", "App"]))
    (out / "no-executable.bin").write_bytes(plistlib.dumps({"CFBundleName": "X"}, fmt=plistlib.FMT_BINARY))


def main(argv):
    if len(argv) != 2:
        print("usage: make_text_seeds.py OUTDIR", file=sys.stderr)
        return 2
    out = Path(argv[1])
    tbd_seeds(out / "tbd")
    plist_seeds(out / "plist")
    count = sum(1 for _ in (out / "tbd").iterdir()) + sum(1 for _ in (out / "plist").iterdir())
    print(f"make_text_seeds: {count} seeds in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
