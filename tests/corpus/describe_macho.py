#!/usr/bin/env python3
"""Independent (stdlib-only) describer of Mach-O files, used to write and
re-check tests/corpus/README.md.

Usage:
  describe_macho.py FILE...            # JSON facts per file / slice
  describe_macho.py --manifest M.json  # every file listed in a fetch_corpus manifest
  add --summary for a one-line-per-slice text summary instead of JSON;
  add --crosscheck to compare the used/unused verdicts with llvm-nm-16 -m and
  llvm-objdump-16 (--bind --lazy-bind --chained-fixups --exports-trie).

It deliberately shares no code with machofix: it is a second opinion. For each
slice it reports the header, the dependent dylibs (in ordinal order), where each
ordinal is referenced (nlist n_desc, bind / lazy-bind opcodes, chained-fixup
imports, re-export trie entries), the special ordinals in use, the fixup style
and the embedded code signature (SuperBlob, CodeDirectories, and whether every
page hash and special-slot hash verifies).
"""
import hashlib
import json
import os
import re
import struct
import subprocess
import sys

LC_REQ_DYLD = 0x80000000
LC_SYMTAB = 0x2
LC_DYSYMTAB = 0xB
LC_LOAD_DYLIB = 0xC
LC_ID_DYLIB = 0xD
LC_LOAD_WEAK_DYLIB = 0x18 | LC_REQ_DYLD
LC_SEGMENT_64 = 0x19
LC_UUID = 0x1B
LC_RPATH = 0x1C | LC_REQ_DYLD
LC_CODE_SIGNATURE = 0x1D
LC_REEXPORT_DYLIB = 0x1F | LC_REQ_DYLD
LC_LAZY_LOAD_DYLIB = 0x20
LC_DYLD_INFO = 0x22
LC_DYLD_INFO_ONLY = 0x22 | LC_REQ_DYLD
LC_LOAD_UPWARD_DYLIB = 0x23 | LC_REQ_DYLD
LC_VERSION_MIN_MACOSX = 0x24
LC_FUNCTION_STARTS = 0x26
LC_DATA_IN_CODE = 0x29
LC_SOURCE_VERSION = 0x2A
LC_BUILD_VERSION = 0x32
LC_DYLD_EXPORTS_TRIE = 0x33 | LC_REQ_DYLD
LC_DYLD_CHAINED_FIXUPS = 0x34 | LC_REQ_DYLD

LC_NAMES = {
    0x2: "LC_SYMTAB", 0xB: "LC_DYSYMTAB", 0xC: "LC_LOAD_DYLIB", 0xD: "LC_ID_DYLIB",
    0xE: "LC_LOAD_DYLINKER", 0x18 | LC_REQ_DYLD: "LC_LOAD_WEAK_DYLIB",
    0x19: "LC_SEGMENT_64", 0x1B: "LC_UUID", 0x1C | LC_REQ_DYLD: "LC_RPATH",
    0x1D: "LC_CODE_SIGNATURE", 0x1E: "LC_SEGMENT_SPLIT_INFO",
    0x1F | LC_REQ_DYLD: "LC_REEXPORT_DYLIB", 0x20: "LC_LAZY_LOAD_DYLIB",
    0x22: "LC_DYLD_INFO", 0x22 | LC_REQ_DYLD: "LC_DYLD_INFO_ONLY",
    0x23 | LC_REQ_DYLD: "LC_LOAD_UPWARD_DYLIB", 0x24: "LC_VERSION_MIN_MACOSX",
    0x26: "LC_FUNCTION_STARTS", 0x28 | LC_REQ_DYLD: "LC_MAIN",
    0x29: "LC_DATA_IN_CODE", 0x2A: "LC_SOURCE_VERSION", 0x32: "LC_BUILD_VERSION",
    0x33 | LC_REQ_DYLD: "LC_DYLD_EXPORTS_TRIE",
    0x34 | LC_REQ_DYLD: "LC_DYLD_CHAINED_FIXUPS", 0x2F: "LC_LINKER_OPTIMIZATION_HINT",
    0x2D: "LC_LINKER_OPTION", 0x35: "LC_FILESET_ENTRY",
}
DYLIB_CMDS = {
    LC_LOAD_DYLIB: "load", LC_LOAD_WEAK_DYLIB: "weak", LC_REEXPORT_DYLIB: "reexport",
    LC_LOAD_UPWARD_DYLIB: "upward", LC_LAZY_LOAD_DYLIB: "lazy",
}
FILETYPES = {1: "MH_OBJECT", 2: "MH_EXECUTE", 6: "MH_DYLIB", 8: "MH_BUNDLE"}
CPU = {(7 | 0x01000000): "x86_64", (12 | 0x01000000): "arm64", 7: "i386", 12: "arm"}
PLATFORMS = {1: "macos", 2: "ios", 6: "maccatalyst"}
TOOLS = {1: "clang", 2: "swift", 3: "ld", 4: "lld", 1024: "metal"}
MH_FLAGS = {
    0x1: "NOUNDEFS", 0x2: "INCRLINK", 0x4: "DYLDLINK", 0x8: "BINDATLOAD", 0x10: "PREBOUND",
    0x20: "SPLIT_SEGS", 0x80: "TWOLEVEL", 0x100: "FORCE_FLAT", 0x200: "NOMULTIDEFS",
    0x2000: "SUBSECTIONS_VIA_SYMBOLS", 0x4000: "CANONICAL", 0x8000: "WEAK_DEFINES",
    0x10000: "BINDS_TO_WEAK", 0x20000: "ALLOW_STACK_EXECUTION", 0x100000: "NO_REEXPORTED_DYLIBS",
    0x200000: "PIE", 0x400000: "DEAD_STRIPPABLE_DYLIB", 0x800000: "HAS_TLV_DESCRIPTORS",
    0x1000000: "NO_HEAP_EXECUTION", 0x2000000: "APP_EXTENSION_SAFE",
}
HASH_TYPES = {1: "sha1", 2: "sha256", 3: "sha256-truncated", 4: "sha384"}
HASH_FUNCS = {1: "sha1", 2: "sha256", 3: "sha256", 4: "sha384"}
BLOB_MAGICS = {
    0xFADE0C02: "CodeDirectory", 0xFADE0C01: "Requirements", 0xFADE0B01: "CMS",
    0xFADE7171: "Entitlements", 0xFADE7172: "DER-Entitlements", 0xFADE8181: "LaunchConstraint",
}
SLOT_NAMES = {0: "CodeDirectory", 1: "InfoPlist", 2: "Requirements", 3: "Resources",
              4: "Application", 5: "Entitlements", 7: "DER-Entitlements",
              0x1000: "AltCodeDirectory0", 0x1001: "AltCodeDirectory1",
              0x1002: "AltCodeDirectory2", 0x10000: "CMS"}


def special_ordinal_name(o):
    return {0: "self", -1: "main-executable", -2: "flat/dynamic-lookup", -3: "weak-lookup"}.get(o, str(o))


def uleb(buf, p):
    r = 0
    s = 0
    while True:
        b = buf[p]
        p += 1
        r |= (b & 0x7F) << s
        s += 7
        if b < 0x80:
            return r, p


def sleb(buf, p):
    r = 0
    s = 0
    while True:
        b = buf[p]
        p += 1
        r |= (b & 0x7F) << s
        s += 7
        if b < 0x80:
            if b & 0x40:
                r -= 1 << s
            return r, p


def cstr(buf, p):
    e = buf.index(b"\0", p)
    return buf[p:e].decode("utf-8", "replace"), e + 1


def slices_of(data):
    """Return [(offset, size)] of the Mach-O slices of a file, or None."""
    if len(data) < 8:
        return None
    be = struct.unpack(">I", data[:4])[0]
    if be in (0xCAFEBABE, 0xCAFEBABF):
        n = struct.unpack(">I", data[4:8])[0]
        if not 0 < n < 30:
            return None  # a Java class file, not a fat file
        out = []
        for i in range(n):
            if be == 0xCAFEBABE:
                _, _, off, size, _ = struct.unpack(">iiIII", data[8 + 20 * i: 28 + 20 * i])
            else:
                _, _, off, size, _, _ = struct.unpack(">iiQQII", data[8 + 32 * i: 40 + 32 * i])
            out.append((off, size))
        return out
    le = struct.unpack("<I", data[:4])[0]
    if le in (0xFEEDFACF, 0xFEEDFACE):
        return [(0, len(data))]
    return None


# ---------------------------------------------------------------- bind opcodes
def parse_binds(buf, lazy):
    """Yield (ordinal, symbol, weak_import) for every bind performed."""
    p = 0
    ordinal = 0
    sym = None
    flags = 0
    out = []
    while p < len(buf):
        b = buf[p]
        p += 1
        op, imm = b & 0xF0, b & 0x0F
        if op == 0x00:
            if not lazy:
                break
        elif op == 0x10:
            ordinal = imm
        elif op == 0x20:
            ordinal, p = uleb(buf, p)
        elif op == 0x30:
            ordinal = 0 if imm == 0 else (imm | 0xF0) - 0x100
        elif op == 0x40:
            flags = imm
            sym, p = cstr(buf, p)
        elif op == 0x50:
            pass
        elif op == 0x60:
            _, p = sleb(buf, p)
        elif op == 0x70:
            _, p = uleb(buf, p)
        elif op == 0x80:
            _, p = uleb(buf, p)
        elif op == 0x90:
            out.append((ordinal, sym, bool(flags & 1)))
        elif op == 0xA0:
            _, p = uleb(buf, p)
            out.append((ordinal, sym, bool(flags & 1)))
        elif op == 0xB0:
            out.append((ordinal, sym, bool(flags & 1)))
        elif op == 0xC0:
            _, p = uleb(buf, p)
            _, p = uleb(buf, p)
            out.append((ordinal, sym, bool(flags & 1)))
        elif op == 0xD0:
            if imm == 0:
                _, p = uleb(buf, p)
        else:
            raise ValueError("bad bind opcode 0x%02x" % b)
    return out


def parse_weak_binds(buf):
    p = 0
    syms = []
    while p < len(buf):
        b = buf[p]
        p += 1
        op, imm = b & 0xF0, b & 0x0F
        if op == 0x00:
            break
        elif op == 0x40:
            s, p = cstr(buf, p)
            syms.append((s, bool(imm & 0x8)))  # 0x8 = BIND_SYMBOL_FLAGS_NON_WEAK_DEFINITION
        elif op in (0x60,):
            _, p = sleb(buf, p)
        elif op in (0x70, 0x80, 0xA0, 0x20):
            _, p = uleb(buf, p)
        elif op == 0xC0:
            _, p = uleb(buf, p)
            _, p = uleb(buf, p)
    return syms


# --------------------------------------------------------------- exports trie
def parse_trie(buf):
    """Return (n_exports, [(name, ordinal, imported_name)] re-exports, weak-def count)."""
    reexports = []
    count = 0
    weak = 0
    if not buf:
        return 0, [], 0
    stack = [(0, "")]
    seen = set()
    while stack:
        off, prefix = stack.pop()
        if off in seen or off >= len(buf):
            continue
        seen.add(off)
        p = off
        term, p = uleb(buf, p)
        if term:
            q = p
            flags, q = uleb(buf, q)
            count += 1
            if flags & 0x4:
                weak += 1
            if flags & 0x08:
                ordn, q = uleb(buf, q)
                imp, q = cstr(buf, q)
                reexports.append((prefix, ordn, imp or prefix))
        p += term
        nchild = buf[p]
        p += 1
        for _ in range(nchild):
            edge, p = cstr(buf, p)
            child, p = uleb(buf, p)
            stack.append((child, prefix + edge))
    return count, reexports, weak


# -------------------------------------------------------------- chained fixups
def parse_chained(sl, off, size, segments):
    buf = sl[off:off + size]
    (ver, starts_off, imports_off, symbols_off, imports_count, imports_format,
     symbols_format) = struct.unpack_from("<7I", buf, 0)
    imports = []
    for i in range(imports_count):
        if imports_format == 1:
            v = struct.unpack_from("<I", buf, imports_off + 4 * i)[0]
            o = v & 0xFF
            o = o - 0x100 if o > 0xF0 else o
            weak = bool(v >> 8 & 1)
            name_off = v >> 9
        elif imports_format == 2:
            v = struct.unpack_from("<I", buf, imports_off + 8 * i)[0]
            o = v & 0xFF
            o = o - 0x100 if o > 0xF0 else o
            weak = bool(v >> 8 & 1)
            name_off = v >> 9
        elif imports_format == 3:
            v = struct.unpack_from("<Q", buf, imports_off + 16 * i)[0]
            o = v & 0xFFFF
            o = o - 0x10000 if o > 0xFFF0 else o
            weak = bool(v >> 16 & 1)
            name_off = v >> 32
        else:
            raise ValueError("imports_format %d" % imports_format)
        if symbols_format != 0:
            name = "?compressed"
        else:
            name, _ = cstr(buf, symbols_off + name_off)
        imports.append((o, name, weak))
    # Walk the chains to count references to each import.
    refs = [0] * imports_count
    formats = set()
    walked = True
    seg_count = struct.unpack_from("<I", buf, starts_off)[0]
    for si in range(seg_count):
        so = struct.unpack_from("<I", buf, starts_off + 4 + 4 * si)[0]
        if so == 0:
            continue
        base = starts_off + so
        (ssize, page_size, pfmt, seg_offset, max_valid, page_count) = struct.unpack_from(
            "<IHHQIH", buf, base)
        formats.add(pfmt)
        if pfmt not in (2, 6):
            walked = False
            continue
        seg_fileoff = segments[si]["fileoff"]
        for pi in range(page_count):
            ps = struct.unpack_from("<H", buf, base + 22 + 2 * pi)[0]
            if ps == 0xFFFF:
                continue
            loc = seg_fileoff + pi * page_size + ps
            while True:
                v = struct.unpack_from("<Q", sl, loc)[0]
                nxt = (v >> 51) & 0xFFF
                if v >> 63:
                    refs[v & 0xFFFFFF] += 1
                if nxt == 0:
                    break
                loc += nxt * 4
    return {"version": ver, "imports_format": imports_format, "symbols_format": symbols_format,
            "pointer_formats": sorted(formats), "imports": imports,
            "refs": refs if walked else None}


# ----------------------------------------------------------------- code sign
def parse_signature(sl, dataoff, datasize):
    b = sl[dataoff:dataoff + datasize]
    magic, length, count = struct.unpack_from(">III", b, 0)
    res = {"superblob_magic": "0x%08x" % magic, "superblob_length": length,
           "datasize": datasize, "blobs": [], "code_directories": []}
    if magic != 0xFADE0CC0:
        res["error"] = "not a SuperBlob"
        return res
    blobs = {}
    for i in range(count):
        typ, off = struct.unpack_from(">II", b, 12 + 8 * i)
        bm, bl = struct.unpack_from(">II", b, off)
        blobs[typ] = b[off:off + bl]
        res["blobs"].append({"slot": "0x%x" % typ, "slot_name": SLOT_NAMES.get(typ, "?"),
                             "magic": BLOB_MAGICS.get(bm, "0x%08x" % bm), "length": bl})
    all_ok = True
    for typ, blob in sorted(blobs.items()):
        if struct.unpack_from(">I", blob, 0)[0] != 0xFADE0C02:
            continue
        (m, ln, version, flags, hash_off, ident_off, nspecial, ncode, code_limit,
         hash_size, hash_type, platform, page_log2, spare2) = struct.unpack_from(
            ">IIIIIIIIIBBBBI", blob, 0)
        ident, _ = cstr(blob, ident_off)
        cd = {"slot": "0x%x" % typ, "version": "0x%x" % version, "flags": "0x%x" % flags,
              "identifier": ident, "ident_offset": ident_off, "hash_type": hash_type,
              "hash": HASH_TYPES.get(hash_type, "?"), "hash_size": hash_size,
              "page_size_log2": page_log2, "page_size": (1 << page_log2) if page_log2 else 0,
              "n_special_slots": nspecial, "n_code_slots": ncode, "code_limit": code_limit,
              "platform": platform}
        if version >= 0x20200:
            team_off = struct.unpack_from(">I", blob, 48)[0]
            cd["team_id"] = cstr(blob, team_off)[0] if team_off else None
        if version >= 0x20400:
            base, limit, eflags = struct.unpack_from(">QQQ", blob, 64)
            cd["exec_seg"] = {"base": base, "limit": limit, "flags": "0x%x" % eflags}
        if version >= 0x20500:
            cd["runtime"] = "0x%x" % struct.unpack_from(">I", blob, 88)[0]
        fl = []
        if flags & 0x2:
            fl.append("adhoc")
        if flags & 0x10000:
            fl.append("runtime")
        if flags & 0x20000:
            fl.append("linker-signed")
        cd["flag_names"] = fl
        hf = HASH_FUNCS.get(hash_type)
        if hf:
            cd["cdhash"] = hashlib.new(hf, blob).hexdigest()[:40]
            page = 1 << page_log2 if page_log2 else code_limit
            bad = 0
            for i in range(ncode):
                chunk = sl[i * page:min((i + 1) * page, code_limit)]
                want = blob[hash_off + i * hash_size: hash_off + (i + 1) * hash_size]
                if hashlib.new(hf, chunk).digest()[:hash_size] != want:
                    bad += 1
            cd["bad_code_slots"] = bad
            bad_special = []
            for s in range(1, nspecial + 1):
                want = blob[hash_off - s * hash_size: hash_off - (s - 1) * hash_size]
                if s in blobs:
                    got = hashlib.new(hf, blobs[s]).digest()[:hash_size]
                else:
                    got = b"\0" * hash_size
                if got != want:
                    bad_special.append(s)
            cd["bad_special_slots"] = bad_special
            cd["code_limit_is_sig_offset"] = code_limit == dataoff
            cd["n_code_slots_expected"] = -(-code_limit // page)
            if bad or bad_special or code_limit != dataoff:
                all_ok = False
        res["code_directories"].append(cd)
    cms = blobs.get(0x10000)
    if cms is not None:
        res["cms_payload_bytes"] = len(cms) - 8
    res["verifies"] = all_ok and bool(res["code_directories"])
    return res


# -------------------------------------------------------------------- slice
def describe_slice(sl):
    magic, cputype, cpusub, filetype, ncmds, sizeofcmds, flags = struct.unpack_from("<IiiIIII", sl, 0)
    if magic != 0xFEEDFACF:
        return {"error": "not a little-endian 64-bit Mach-O (magic 0x%08x)" % magic}
    d = {"arch": CPU.get(cputype, "cpu%d" % cputype), "cpusubtype": "0x%x" % (cpusub & 0xFFFFFFFF),
         "filetype": FILETYPES.get(filetype, str(filetype)), "ncmds": ncmds,
         "sizeofcmds": sizeofcmds, "flags": "0x%x" % flags,
         "flag_names": [n for bit, n in sorted(MH_FLAGS.items()) if flags & bit],
         "twolevel": bool(flags & 0x80)}
    p = 32
    cmds = []
    dylibs = []
    segments = []
    rpaths = []
    info = {}
    min_fileoff = len(sl)
    for _ in range(ncmds):
        cmd, cmdsize = struct.unpack_from("<II", sl, p)
        name = LC_NAMES.get(cmd, "0x%x" % cmd)
        cmds.append(name)
        if cmd in DYLIB_CMDS:
            name_off, ts, cur, compat = struct.unpack_from("<IIII", sl, p + 8)
            path, _ = cstr(sl, p + name_off)
            dylibs.append({"ordinal": len(dylibs) + 1, "cmd": name, "path": path,
                           "current_version": "%d.%d.%d" % (cur >> 16, cur >> 8 & 0xFF, cur & 0xFF)})
        elif cmd == LC_ID_DYLIB:
            d["install_name"], _ = cstr(sl, p + struct.unpack_from("<I", sl, p + 8)[0])
        elif cmd == LC_SEGMENT_64:
            segname = sl[p + 8:p + 24].rstrip(b"\0").decode()
            vmaddr, vmsize, fileoff, filesize = struct.unpack_from("<QQQQ", sl, p + 24)
            nsects = struct.unpack_from("<I", sl, p + 64)[0]
            segments.append({"name": segname, "vmaddr": vmaddr, "vmsize": vmsize,
                             "fileoff": fileoff, "filesize": filesize})
            for s in range(nsects):
                so = p + 72 + 80 * s
                off = struct.unpack_from("<I", sl, so + 48)[0]
                size = struct.unpack_from("<Q", sl, so + 40)[0]
                stype = struct.unpack_from("<I", sl, so + 64)[0] & 0xFF
                if off and size and stype not in (0x1, 0xC, 0x12):  # zerofill kinds
                    min_fileoff = min(min_fileoff, off)
        elif cmd == LC_RPATH:
            rpaths.append(cstr(sl, p + struct.unpack_from("<I", sl, p + 8)[0])[0])
        elif cmd in (LC_DYLD_INFO, LC_DYLD_INFO_ONLY):
            info["dyld_info"] = struct.unpack_from("<10I", sl, p + 8)
            info["dyld_info_cmd"] = name
        elif cmd == LC_DYLD_CHAINED_FIXUPS:
            info["chained"] = struct.unpack_from("<II", sl, p + 8)
        elif cmd == LC_DYLD_EXPORTS_TRIE:
            info["trie"] = struct.unpack_from("<II", sl, p + 8)
        elif cmd == LC_SYMTAB:
            info["symtab"] = struct.unpack_from("<IIII", sl, p + 8)
        elif cmd == LC_CODE_SIGNATURE:
            info["codesig"] = struct.unpack_from("<II", sl, p + 8)
        elif cmd == LC_BUILD_VERSION:
            plat, minos, sdk, ntools = struct.unpack_from("<IIII", sl, p + 8)
            tools = []
            for t in range(ntools):
                tool, tv = struct.unpack_from("<II", sl, p + 24 + 8 * t)
                tools.append("%s %d.%d.%d" % (TOOLS.get(tool, str(tool)), tv >> 16, tv >> 8 & 0xFF, tv & 0xFF))
            d["build_version"] = {"platform": PLATFORMS.get(plat, str(plat)),
                                  "minos": "%d.%d" % (minos >> 16, minos >> 8 & 0xFF),
                                  "sdk": "%d.%d" % (sdk >> 16, sdk >> 8 & 0xFF), "tools": tools}
        elif cmd == LC_VERSION_MIN_MACOSX:
            v, sdk = struct.unpack_from("<II", sl, p + 8)
            d["version_min_macosx"] = {"minos": "%d.%d" % (v >> 16, v >> 8 & 0xFF),
                                       "sdk": "%d.%d" % (sdk >> 16, sdk >> 8 & 0xFF)}
        p += cmdsize
    d["load_commands"] = cmds
    d["segments"] = [s["name"] for s in segments]
    d["rpaths"] = rpaths
    d["headerpad_bytes"] = min_fileoff - (32 + sizeofcmds)
    ndylib = len(dylibs)
    # ---- where ordinals are referenced
    uses = {i: {"nlist": 0, "bind": 0, "lazy_bind": 0, "chained": 0, "reexport_trie": 0}
            for i in range(-3, ndylib + 1)}
    examples = {i: None for i in uses}

    def note(o, src, sym):
        if o not in uses:
            uses[o] = {"nlist": 0, "bind": 0, "lazy_bind": 0, "chained": 0, "reexport_trie": 0}
            examples[o] = None
        uses[o][src] += 1
        if examples[o] is None:
            examples[o] = sym

    weak_refs = []
    nlist_ordinal = {}
    if "symtab" in info:
        symoff, nsyms, stroff, strsize = info["symtab"]
        for i in range(nsyms):
            strx, ntype, nsect, ndesc, nvalue = struct.unpack_from("<IBBHQ", sl, symoff + 16 * i)
            if ntype & 0xE0 or (ntype & 0x0E) != 0 or not ntype & 1:
                continue
            if nvalue:
                continue  # common symbol
            nm, _ = cstr(sl, stroff + strx)
            o = (ndesc >> 8) & 0xFF
            o = {0xFE: -2, 0xFF: -1}.get(o, o)
            note(o, "nlist", nm)
            nlist_ordinal[nm] = o
            if ndesc & 0x40:
                weak_refs.append(nm)
    d["weak_ref_undefined"] = len(weak_refs)
    if "dyld_info" in info:
        (rb_off, rb_size, b_off, b_size, wb_off, wb_size, lb_off, lb_size,
         ex_off, ex_size) = info["dyld_info"]
        d["fixups"] = info["dyld_info_cmd"]
        for o, s, w in parse_binds(sl[b_off:b_off + b_size], False):
            note(o, "bind", s)
        for o, s, w in parse_binds(sl[lb_off:lb_off + lb_size], True):
            note(o, "lazy_bind", s)
        wb = parse_weak_binds(sl[wb_off:wb_off + wb_size])
        d["weak_bind_symbols"] = len([s for s, strong in wb if not strong])
        d["weak_bind_strong_defs"] = len([s for s, strong in wb if strong])
        trie = sl[ex_off:ex_off + ex_size]
    else:
        trie = b""
    if "chained" in info:
        d["fixups"] = "LC_DYLD_CHAINED_FIXUPS"
        ch = parse_chained(sl, info["chained"][0], info["chained"][1], segments)
        d["chained"] = {k: ch[k] for k in ("version", "imports_format", "symbols_format", "pointer_formats")}
        d["chained"]["imports_count"] = len(ch["imports"])
        unref = 0
        for i, (o, s, w) in enumerate(ch["imports"]):
            note(o, "chained", s)
            if ch["refs"] is not None and ch["refs"][i] == 0:
                unref += 1
        d["chained"]["imports_without_fixup"] = unref if ch["refs"] is not None else None
        # Weak-lookup (-3) imports name no dylib; the nlist entry (if any) does.
        def nlist_dylib(sym):
            o = nlist_ordinal.get(sym)
            if o is None:
                return None  # e.g. a weak definition of this image: no undefined entry
            return dylibs[o - 1]["path"] if 0 < o <= len(dylibs) else special_ordinal_name(o)
        d["chained"]["weak_lookup_imports"] = [
            {"symbol": s, "nlist_dylib": nlist_dylib(s)} for o, s, w in ch["imports"] if o == -3]
    if "trie" in info:
        trie = sl[info["trie"][0]:info["trie"][0] + info["trie"][1]]
    if "fixups" not in d:
        d["fixups"] = "none"
    n_exp, reexp, n_weakdef = parse_trie(trie)
    d["exports"] = n_exp
    d["exports_weak_def"] = n_weakdef
    d["reexports"] = [{"name": n, "ordinal": o, "imported": i} for n, o, i in reexp]
    for n, o, i in reexp:
        note(o, "reexport_trie", n)
    for dl in dylibs:
        u = uses[dl["ordinal"]]
        dl["refs"] = {k: v for k, v in u.items() if v}
        dl["example_symbol"] = examples[dl["ordinal"]]
        dl["used"] = bool(dl["refs"]) or dl["cmd"] == "LC_REEXPORT_DYLIB"
    d["dylibs"] = dylibs
    # In a flat-namespace image (MH_TWOLEVEL clear) dyld ignores ordinals: any
    # loaded image may supply any symbol, so nothing can be proven unused.
    d["unused_dylibs"] = ([dl["path"] for dl in dylibs if not dl["used"]]
                          if d["twolevel"] else None)
    d["unreferenced_by_ordinal"] = [dl["path"] for dl in dylibs if not dl["used"]]
    d["special_ordinals"] = {special_ordinal_name(o): {k: v for k, v in uses[o].items() if v}
                             for o in (0, -1, -2, -3) if any(uses[o].values())}
    bad = sorted(o for o in uses if (o > ndylib or o < -3) and any(uses[o].values()))
    d["out_of_range_ordinals"] = bad
    if "codesig" in info:
        d["code_signature"] = parse_signature(sl, *info["codesig"])
        d["code_signature"]["dataoff"] = info["codesig"][0]
        d["code_signature"]["at_end_of_file"] = info["codesig"][0] + info["codesig"][1] == len(sl)
    else:
        d["code_signature"] = None
    return d


def describe_file(path):
    with open(path, "rb") as f:
        data = f.read()
    sls = slices_of(data)
    if sls is None:
        return {"path": path, "error": "not Mach-O"}
    out = {"path": path, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
           "kind": "universal" if struct.unpack(">I", data[:4])[0] in (0xCAFEBABE, 0xCAFEBABF) else "thin",
           "slices": []}
    for off, size in sls:
        s = describe_slice(data[off:off + size])
        s["offset"] = off
        s["size"] = size
        out["slices"].append(s)
    return out


def summary(desc):
    lines = []
    for s in desc.get("slices", []):
        cs = s.get("code_signature")
        if cs:
            cds = cs["code_directories"]
            sig = "%s; blobs=%s; %s" % (
                ",".join(b["magic"] for b in cs["blobs"]),
                "+".join("%s/%s/%s/%dB" % (c["version"], c["flags"], c["hash"], c["page_size"]) for c in cds),
                "verifies" if cs["verifies"] else "DOES NOT VERIFY")
        else:
            sig = "unsigned"
        lines.append("%s [%s %s %s] fixups=%s unused=%s special=%s sig=%s" % (
            os.path.basename(desc["path"]), s["arch"], s["filetype"], desc["kind"], s["fixups"],
            ([os.path.basename(u) for u in s["unused_dylibs"]] if s["unused_dylibs"] is not None
             else "n/a (flat namespace; unreferenced by ordinal: %s)"
             % [os.path.basename(u) for u in s["unreferenced_by_ordinal"]]),
            s["special_ordinals"], sig))
    return "\n".join(lines)


# ------------------------------------------------------- llvm cross-check
def llvm_short_names(path):
    """Names LLVM's tools use for a dylib (guessLibraryShortName): framework
    name, or libfoo for /x/libfoo.A.dylib / libfoo.dylib."""
    base = os.path.basename(path)
    m = re.search(r"/([^/]+)\.framework/", path)
    names = {base}
    if m:
        names.add(m.group(1))
    comps = base.split(".")
    for i in range(1, len(comps)):  # libllama.metal.v0.4.0.dylib -> ..., libllama.metal.v0, ...
        names.add(".".join(comps[:i]))
    return names


def llvm_used_names(path, arch, kind):
    """Library short names that llvm-nm-16 -m ("from X") and llvm-objdump-16
    (--bind/--lazy-bind/--chained-fixups/--exports-trie) attribute symbols to."""
    archarg = ["--arch=" + arch] if kind == "universal" else []
    names = {"nlist": set(), "fixups": set()}
    nm = subprocess.run(["llvm-nm-16", "-m"] + archarg + [path], capture_output=True, text=True, check=True)
    for line in nm.stdout.splitlines():
        m = re.search(r"\(undefined\).*\(from ([^)]+)\)$", line)
        if m:
            names["nlist"].add(m.group(1))
    od = subprocess.run(["llvm-objdump-16", "--macho", "--bind", "--lazy-bind", "--chained-fixups",
                         "--exports-trie"] + archarg + [path], capture_output=True, text=True, check=True)
    section = None
    for line in od.stdout.splitlines():
        if line.startswith(("Bind table", "Lazy bind table", "Weak bind table", "Exports trie")):
            section = line
            continue
        m = re.search(r"lib_ordinal = (\d+) \(([^)]+)\)", line)
        if m:
            names["fixups"].add(m.group(2))
            continue
        if section and (section.startswith("Bind") or section.startswith("Lazy")):
            parts = line.split()
            if len(parts) >= 5 and parts[0].startswith("__"):
                names["fixups"].add(parts[-2])
        if section and section.startswith("Exports") and "[re-export]" in line:
            m = re.search(r"\(from ([^/)]+)", line)
            if m:
                names["fixups"].add(m.group(1))
    return names


def crosscheck(desc):
    """Compare this script's used/unused verdicts with LLVM's tools; returns lines."""
    out = []
    for s in desc.get("slices", []):
        got = llvm_used_names(desc["path"], s["arch"], desc["kind"])
        llvm_all = got["nlist"] | got["fixups"]
        problems = []
        for dl in s["dylibs"]:
            short = llvm_short_names(dl["path"])
            in_llvm = bool(short & llvm_all)
            if in_llvm != dl["used"] and s["twolevel"]:
                problems.append("%s: ours=%s llvm=%s" % (dl["path"], dl["used"], in_llvm))
            if not s["twolevel"] and dl["used"] != bool(short & got["fixups"]):
                problems.append("%s (flat): ours=%s llvm-binds=%s" % (dl["path"], dl["used"], bool(short & got["fixups"])))
        only_nlist = sorted(dl["path"] for dl in s["dylibs"]
                            if llvm_short_names(dl["path"]) & got["nlist"]
                            and not llvm_short_names(dl["path"]) & got["fixups"])
        out.append("%s %s: %s%s" % (os.path.basename(desc["path"]), s["arch"],
                                     "MISMATCH " + "; ".join(problems) if problems else "agrees with llvm",
                                     ("; used via nlist only (no bind/import): %s" % only_nlist) if only_nlist else ""))
    return out


def main(argv):
    as_summary = "--summary" in argv
    do_cross = "--crosscheck" in argv
    argv = [a for a in argv if a not in ("--summary", "--crosscheck")]
    paths = []
    if argv[:1] == ["--manifest"]:
        with open(argv[1]) as f:
            paths = [e["cached_path"] for e in json.load(f)["files"]]
        argv = argv[2:]
    paths += argv
    if not paths:
        print(__doc__, file=sys.stderr)
        return 2
    descs = [describe_file(p) for p in paths]
    if do_cross:
        bad = 0
        for d in descs:
            for line in crosscheck(d):
                bad += "MISMATCH" in line
                print(line)
        return 1 if bad else 0
    if as_summary:
        for d in descs:
            print(summary(d))
    else:
        json.dump(descs, sys.stdout, indent=1)
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
