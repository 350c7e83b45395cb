// Writes the synthetic seed corpora of the fuzz targets (run by fuzz/run_fuzzers.sh
// at run time; nothing generated is committed):
//
//   fuzz_make_seeds OUTDIR [MACHO...]  ->  OUTDIR/macho/*, OUTDIR/codesign/*, OUTDIR/pte/*,
//                                          OUTDIR/exports/*
//
// Small files on purpose (about 1-10 KB): libFuzzer mutates small inputs much
// faster. The linker-made fixtures and the ExecuTorch samples are added by the script;
// the exports tries of the Mach-O files it names (the fixtures, the app fixtures'
// libraries) are written here, one per 64-bit slice, since fuzz_exports takes a
// bare trie and the linker's tries nest nodes as no synthetic one does.
#include <filesystem>
#include <fstream>
#include <iostream>

#include "core/base/error.h"
#include "core/format/fat.h"
#include "tests/support/whole_file.h"

#include "fuzz/sample_images.h"

#if __has_include("tests/pte/pte_writer.h")
#include "tests/pte/pte_writer.h"
#define MACHOFIX_SEEDS_HAVE_PTE 1
#else
#define MACHOFIX_SEEDS_HAVE_PTE 0
#endif

namespace fs = std::filesystem;
using namespace machofix;
using namespace machofix::samples;

namespace {

fs::path out_root;
int written = 0;

void write(const std::string& corpus, const std::string& name, const std::vector<uint8_t>& bytes) {
  fs::create_directories(out_root / corpus);
  std::ofstream file(out_root / corpus / name, std::ios::binary | std::ios::trunc);
  file.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!file.flush()) throw std::runtime_error("cannot write " + (out_root / corpus / name).string());
  ++written;
}

struct Named {
  std::string name;
  std::vector<uint8_t> bytes;
};

std::vector<Named> thin_images() {
  return {
      {"dyld_info_arm64", dyld_info_dylib().build().bytes},
      {"dyld_info_x86_64", dyld_info_dylib(macho::CPU_TYPE_X86_64).build().bytes},
      {"chained1", chained_dylib(macho::DYLD_CHAINED_IMPORT).build().bytes},
      {"chained2", chained_dylib(macho::DYLD_CHAINED_IMPORT_ADDEND).build().bytes},
      {"chained3", chained_dylib(macho::DYLD_CHAINED_IMPORT_ADDEND64).build().bytes},
      {"many_dylibs", many_dylibs().build().bytes},
      {"command_kinds", command_kinds().build().bytes},
      {"flat_executable", flat_executable().build().bytes},
      {"bundle", dyld_info_dylib().filetype(macho::MH_BUNDLE).build().bytes},
  };
}

void macho_and_codesign_seeds() {
  std::vector<Named> images = thin_images();
  for (const Named& image : images) {
    write("macho", image.name, image.bytes);
    std::vector<uint8_t> signed_image = signed_copy(image.bytes);
    write("macho", image.name + "_signed", signed_image);
    write("codesign", image.name + "_lld", signed_image);
    write("codesign", image.name + "_unsigned", image.bytes);
  }
  std::vector<uint8_t> arm64 = signed_copy(images[0].bytes), x86_64 = signed_copy(images[1].bytes);
  std::vector<uint8_t> chained = signed_copy(images[3].bytes);
  write("macho", "universal_fat32", universal({{macho::CPU_TYPE_X86_64, 3, x86_64}, {macho::CPU_TYPE_ARM64, 0, arm64}}));
  write("macho", "universal_fat64", universal({{macho::CPU_TYPE_ARM64, 0, chained}, {macho::CPU_TYPE_X86_64, 3, x86_64}}, true));
  // A 32-bit slice is carried along untouched.
  write("macho", "universal_with_i386", universal({{7, 3, std::vector<uint8_t>(64, 0xce)}, {macho::CPU_TYPE_ARM64, 0, arm64}}));
  write("codesign", "universal_fat32", universal({{macho::CPU_TYPE_ARM64, 0, arm64}, {macho::CPU_TYPE_X86_64, 3, x86_64}}));

  // codesign-style signatures: several blobs, alternate CodeDirectories, identities.
  const std::vector<uint8_t>& base = images[0].bytes;
  SignatureSpec adhoc;
  write("codesign", "codesign_adhoc", codesign_signed(base, adhoc));
  SignatureSpec entitled = adhoc;
  entitled.entitlements = "<plist><dict><key>com.apple.security.cs.disable-library-validation</key><true/></dict></plist>";
  write("codesign", "codesign_entitlements", codesign_signed(base, entitled));
  SignatureSpec two = adhoc;
  two.hash_types = {kHashSha1, kHashSha256};
  write("codesign", "codesign_sha1_sha256", codesign_signed(base, two));
  SignatureSpec three = adhoc;
  three.hash_types = {kHashSha256, kHashSha384, kHashSha256Truncated};
  write("codesign", "codesign_three_cds", codesign_signed(images[3].bytes, three));
  SignatureSpec identity = entitled;
  identity.cms_length = 64;
  identity.flags = cs::kFlagRuntime;
  write("codesign", "identity", codesign_signed(base, identity));
  write("macho", "identity", codesign_signed(base, identity));
  SignatureSpec bare = adhoc;
  bare.requirements = false;
  bare.cms_length = 0;
  write("codesign", "cd_only", codesign_signed(images[5].bytes, bare));
}

#if MACHOFIX_SEEDS_HAVE_PTE
void pte_seeds() {
  // Blobs like an AOTInductor .so: signed, one removable dylib.
  std::vector<uint8_t> forward = signed_copy(dyld_info_dylib().build().bytes, "forward.so");
  std::vector<uint8_t> decode = signed_copy(chained_dylib().build().bytes, "decode.so");
  std::vector<uint8_t> fat = universal({{macho::CPU_TYPE_ARM64, 0, forward},
                                        {macho::CPU_TYPE_X86_64, 3, signed_copy(dyld_info_dylib(macho::CPU_TYPE_X86_64).build().bytes)}});
  std::vector<uint8_t> unsigned_blob = dyld_info_dylib().build().bytes;
  using namespace pte_test;
  auto shrink = [](Spec spec) {  // small weights: small seeds
    for (Data& data : spec.data)
      if (data.bytes.size() > 1000 && !looks_like_thin_macho(Bytes(data.bytes)) && !looks_like_universal(Bytes(data.bytes)))
        data.bytes.resize(64);
    return spec;
  };
  MethodBlobs f{"forward", &forward, 1}, d{"decode", &decode, 2};
  write("pte", "hash_forward.pte", build(shrink(aoti_spec(Keys::Hash, {f}))));
  write("pte", "method_two.pte", build(shrink(aoti_spec(Keys::Method, {f, d}, 64))));
  write("pte", "hash_inline.pte", build(shrink(aoti_spec(Keys::Hash, {f, d}, 128, PayloadAt::Inline))));
  Spec short_header = shrink(aoti_spec(Keys::Hash, {f}));
  short_header.header_length = 24;
  write("pte", "header24.pte", build(short_header));
  write("pte", "universal_blob.pte", build(shrink(aoti_spec(Keys::Hash, {{"forward", &fat, 1}}))));
  write("pte", "unsigned_blob.pte", build(shrink(aoti_spec(Keys::Method, {{"forward", &unsigned_blob, 1}}))));
  Spec ptd;
  ptd.ptd = true;
  ptd.segment_alignment = 16;
  ptd.data = {{forward, 0, 1}, {pseudo_random(48, 3), 0, 16}};
  ptd.named = {{"forward_so_blob", 0}, {"forward_weights_blob", 1}};
  write("pte", "method_key.ptd", build(ptd));
}
#endif

// ---- exports tries (fuzz_exports takes the bare trie) ----------------------------

// A trie of nested nodes, laid out in order; every offset below 128 (one-byte ULEBs).
struct TrieNode {
  std::vector<uint8_t> terminal;                      // empty: none
  std::vector<std::pair<std::string, size_t>> edges;  // label, node index
};

std::vector<uint8_t> lay_out(const std::vector<TrieNode>& nodes) {
  std::vector<uint64_t> offsets;
  uint64_t at = 0;
  for (const TrieNode& node : nodes) {
    offsets.push_back(at);
    at += 1 + node.terminal.size() + 1;
    for (const auto& edge : node.edges) at += edge.first.size() + 1 + 1;
  }
  if (at >= 128) throw std::runtime_error("seed trie too large for one-byte offsets");
  std::vector<uint8_t> out;
  for (const TrieNode& node : nodes) {
    out.push_back(static_cast<uint8_t>(node.terminal.size()));
    out.insert(out.end(), node.terminal.begin(), node.terminal.end());
    out.push_back(static_cast<uint8_t>(node.edges.size()));
    for (const auto& [label, child] : node.edges) {
      out.insert(out.end(), label.begin(), label.end());
      out.push_back(0);
      out.push_back(static_cast<uint8_t>(offsets[child]));
    }
  }
  return out;
}

void exports_seeds() {
  using namespace macho;
  write("exports", "dyld_info_trie", make_trie({{"_mine", 0, 0x10, 0, 0, ""}, {"_reexported", EXPORT_SYMBOL_FLAGS_REEXPORT, 0, 3, 0, "_foo"}}).bytes);
  write("exports", "reexport_same_name", reexport_trie("_foo", 3).bytes);
  write("exports", "reexport_long_ordinal", reexport_trie("_foo", 2, "_bar", 5).bytes);
  write("exports", "kinds", make_trie({{"_weak", 0x04, 0x20, 0, 0, ""},
                                       {"_tlv", 0x01, 0x30, 0, 0, ""},
                                       {"_abs", 0x02, 0x1234, 0, 0, ""},
                                       {"_re1", EXPORT_SYMBOL_FLAGS_REEXPORT, 0, 1, 0, "_malloc"}}).bytes);
  // As linkers write them: shared prefixes on inner nodes, a stub-and-resolver.
  write("exports", "nested", lay_out({{{}, {{"_", 1}}},
                                      {{}, {{"foo", 2}, {"ba", 3}}},
                                      {{0x00, 0x10}, {}},
                                      {{}, {{"r", 4}, {"z", 5}}},
                                      {{0x08, 0x03, '_', 'q', 0}, {}},
                                      {{0x10, 0x20, 0x40}, {{"_x", 6}}},
                                      {{0x04, 0x50}, {}}}));
  write("exports", "root_terminal", lay_out({{{0x00, 0x01}, {{"a", 1}}}, {{0x08, 0x02, 0}, {}}}));
}

// The exports trie of each 64-bit slice of the Mach-O file at `path`, if any.
void tries_of(const fs::path& path) {
  std::vector<uint8_t> bytes = test::whole_file<std::vector<uint8_t>>(path.string());
  Bytes file(bytes);
  std::vector<Bytes> slices;
  try {
    if (looks_like_universal(file)) {
      for (const FatSlice& entry : parse_universal(file).slices)
        if (entry.cputype & macho::CPU_ARCH_ABI64) slices.push_back(file.sub(entry.offset, entry.size, "universal slice"));
    } else if (looks_like_thin_macho(file)) {
      slices.push_back(file);
    }
    for (const Bytes& slice : slices) {
      MachO image = parse_macho(slice);
      const DataRange& range = image.exports_trie.present ? image.exports_trie : image.dyld_info.exports;
      if (range.size == 0) continue;
      Bytes trie = slice.sub(range.offset, range.size, "exports trie");
      write("exports", path.filename().string() + "-" + image.arch(), std::vector<uint8_t>(trie.data(), trie.data() + trie.size()));
    }
  } catch (const Error&) {
    // Not a Mach-O file machofix reads: no seed.
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: fuzz_make_seeds OUTDIR [MACHO...]\n";
    return 2;
  }
  out_root = argv[1];
  try {
    macho_and_codesign_seeds();
#if MACHOFIX_SEEDS_HAVE_PTE
    pte_seeds();
#endif
    exports_seeds();
    for (int i = 2; i < argc; ++i) tries_of(argv[i]);
  } catch (const Error& error) {
    std::cerr << "fuzz_make_seeds: " << error.describe() << "\n";
    return 1;
  } catch (const std::exception& error) {
    std::cerr << "fuzz_make_seeds: " << error.what() << "\n";
    return 1;
  }
  std::cout << "fuzz_make_seeds: " << written << " seeds in " << out_root.string() << "\n";
  return 0;
}
