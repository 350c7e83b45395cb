// Code signatures: reading (every rule the kernel applies), verifying, renewing,
// replacing an identity signature and adding a linker-style one.
//
// Inputs are real Mach-O files linked at test time by clang-16 and ld64.lld-16
// (installed by scripts/setup.sh) into a temporary directory, with a small .tbd
// stub for libSystem. lld signs arm64 output itself; llvm-install-name-tool-16
// re-signs as llvm-objcopy does: both are references machofix must agree with.
// Signatures no LLVM tool writes (codesign's ad hoc layout, agile SHA-1 + SHA-256,
// Developer ID) are built here by TestSigner from an lld file, with OpenSSL's
// one-shot digests and none of core/codesign.cc's code.
#include <doctest/doctest.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <atomic>
#include <optional>

#include "core/format/codesign.h"
#include "core/rewrite/macho_repair.h"
#include "tests/support/checked_options.h"
#include "core/io/file_io.h"
#include "core/format/macho_format.h"
#include "core/base/sha.h"

using namespace machofix;
namespace fs = std::filesystem;

namespace {

// ---------------------------------------------------------------------------
// Fixtures: linked once per test run.

const char* kLibSystemTbd = R"(--- !tapi-tbd
tbd-version: 4
targets: [ arm64-macos, x86_64-macos ]
install-name: '/usr/lib/libSystem.B.dylib'
exports:
  - targets: [ arm64-macos, x86_64-macos ]
    symbols: [ _printf, _puts, dyld_stub_binder ]
...
)";

// Code spanning several 4 KiB pages (the table lands in __TEXT,__const).
const char* kLibrarySource = R"(int printf(const char*, ...);
const char table[9000] = {1, 2, 3};
int hello(int x) { printf("hello %d\n", x); return table[x] + 1; }
)";

const char* kMainSource = R"(int printf(const char*, ...);
int main(void) { printf("hi\n"); return 0; }
)";

// Large enough for hash_pages to use two threads (more than 512 pages).
const char* kLargeSource = R"(const char large[2500000] = {1};
int get(int i) { return large[i]; }
)";

void write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::vector<uint8_t> read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void write_file(const fs::path& path, const std::vector<uint8_t>& data) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

void run(const std::string& command) {
  INFO(command);
  REQUIRE(std::system((command + " >/dev/null 2>&1").c_str()) == 0);
}

class Fixtures {
 public:
  static Fixtures& get() {
    static Fixtures fixtures;
    return fixtures;
  }
  ~Fixtures() { fs::remove_all(dir_); }

  const fs::path& dir() const { return dir_; }

  // Links `source` ("lib", "main", "large") for `arch`; `flags` go to ld64.lld-16.
  // `kind` is "dylib" or "exec". Cached by output name.
  std::vector<uint8_t> link(const std::string& output, const std::string& source, const std::string& arch,
                            const std::string& kind, const std::string& flags = "") {
    fs::path out = dir_ / output;
    if (!fs::exists(out)) {
      fs::path object = compile(source, arch);
      std::string command = "ld64.lld-16 -arch " + arch + " -platform_version macos 11.0 11.0 ";
      if (kind == "dylib") command += "-dylib -install_name @rpath/lib" + source + ".dylib ";
      run(command + flags + " " + object.string() + " " + (dir_ / "libSystem.tbd").string() + " -o " + out.string());
    }
    return read_file(out);
  }

 private:
  Fixtures() {
    char pattern[] = "/tmp/machofix-codesign-XXXXXX";
    REQUIRE(mkdtemp(pattern) != nullptr);
    dir_ = pattern;
    write_text(dir_ / "libSystem.tbd", kLibSystemTbd);
    write_text(dir_ / "lib.c", kLibrarySource);
    write_text(dir_ / "main.c", kMainSource);
    write_text(dir_ / "large.c", kLargeSource);
  }

  fs::path compile(const std::string& source, const std::string& arch) {
    fs::path object = dir_ / (source + "_" + arch + ".o");
    if (!fs::exists(object))
      run("clang-16 -target " + arch + "-apple-macos11 -O1 -c " + (dir_ / (source + ".c")).string() + " -o " +
          object.string());
    return object;
  }

  fs::path dir_;
};

std::vector<uint8_t> lld_arm64_dylib() { return Fixtures::get().link("lib_arm64.dylib", "lib", "arm64", "dylib"); }
std::vector<uint8_t> lld_arm64_exec() { return Fixtures::get().link("main_arm64", "main", "arm64", "exec"); }
std::vector<uint8_t> lld_x86_dylib_signed() {
  return Fixtures::get().link("lib_x86_64_signed.dylib", "lib", "x86_64", "dylib", "-adhoc_codesign");
}
std::vector<uint8_t> lld_x86_exec_signed() {
  return Fixtures::get().link("main_x86_64_signed", "main", "x86_64", "exec", "-adhoc_codesign");
}
std::vector<uint8_t> lld_x86_dylib_unsigned() {
  return Fixtures::get().link("lib_x86_64.dylib", "lib", "x86_64", "dylib");
}

MachO parse(const std::vector<uint8_t>& file) { return parse_macho(Bytes(file)); }

std::vector<std::string> verify(const std::vector<uint8_t>& file) { return verify_code_signature(parse(file)); }

std::vector<uint8_t> renewed(std::vector<uint8_t> file) {
  renew_code_signature(file, 0);
  return file;
}

template <typename F>
Error error_of(F&& f) {
  try {
    f();
  } catch (const Error& error) {
    return error;
  }
  FAIL("no machofix::Error thrown");
  return Error("unreachable");
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Test-side big-endian access to a file being corrupted or built.
uint32_t be32(const std::vector<uint8_t>& data, uint64_t at) { return Bytes(data).be32(at); }
void set_be32(std::vector<uint8_t>& data, uint64_t at, uint32_t value) { put_be32(data, at, value); }

uint64_t signature_offset(const std::vector<uint8_t>& file) { return parse(file).code_signature.offset; }

// lld: SuperBlob header + one index entry, padded to 24; the CodeDirectory follows.
constexpr uint64_t kLldCd = 24;

// ---------------------------------------------------------------------------
// TestSigner: writes signatures with layouts lld does not produce.

std::vector<uint8_t> digest(uint8_t hash_type, const uint8_t* data, size_t size) {
  const EVP_MD* md = hash_type == 1 ? EVP_sha1() : hash_type == 4 ? EVP_sha384() : EVP_sha256();
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  REQUIRE(EVP_Digest(data, size, out, &length, md, nullptr) == 1);
  size_t kept = hash_type == 1 || hash_type == 3 ? 20 : length;
  return std::vector<uint8_t>(out, out + kept);
}

std::vector<uint8_t> blob(uint32_t magic, const std::string& payload) {
  std::vector<uint8_t> out(8 + payload.size());
  set_be32(out, 0, magic);
  set_be32(out, 4, static_cast<uint32_t>(out.size()));
  std::copy(payload.begin(), payload.end(), out.begin() + 8);
  return out;
}

struct CdSpec {
  uint8_t hash_type = 2;
  uint8_t page_shift = 12;
  uint32_t flags = 0x2;
  std::string identifier = "libfoo";
  std::string team;
  uint32_t special_slots = 0;
  std::map<uint32_t, std::vector<uint8_t>> external;  // hashes of Info.plist / resources
  uint64_t exec_seg_limit = 0x4000;
  uint64_t exec_seg_flags = 0;
};

// codesign's layout: 88-byte version 0x20400 header, identifier, team id, special
// slots, code slots; nothing padded.
std::vector<uint8_t> code_directory(const std::vector<uint8_t>& file, uint64_t code_limit, const CdSpec& spec,
                                    const std::map<uint32_t, std::vector<uint8_t>>& blobs) {
  size_t hash_size = digest(spec.hash_type, nullptr, 0).size();
  uint64_t page = uint64_t(1) << spec.page_shift;
  uint64_t pages = (code_limit + page - 1) / page;
  uint64_t ident = 88;
  uint64_t team = spec.team.empty() ? 0 : ident + spec.identifier.size() + 1;
  uint64_t hash_offset =
      ident + spec.identifier.size() + 1 + (team ? spec.team.size() + 1 : 0) + spec.special_slots * hash_size;
  std::vector<uint8_t> cd(hash_offset + pages * hash_size, 0);
  set_be32(cd, 0, cs::kCodeDirectoryMagic);
  set_be32(cd, 4, static_cast<uint32_t>(cd.size()));
  set_be32(cd, 8, 0x20400);
  set_be32(cd, 12, spec.flags);
  set_be32(cd, 16, static_cast<uint32_t>(hash_offset));
  set_be32(cd, 20, static_cast<uint32_t>(ident));
  set_be32(cd, 24, spec.special_slots);
  set_be32(cd, 28, static_cast<uint32_t>(pages));
  set_be32(cd, 32, static_cast<uint32_t>(code_limit));
  cd[36] = static_cast<uint8_t>(hash_size);
  cd[37] = spec.hash_type;
  cd[39] = spec.page_shift;
  set_be32(cd, 48, static_cast<uint32_t>(team));
  put_be64(cd, 72, spec.exec_seg_limit);
  put_be64(cd, 80, spec.exec_seg_flags);
  std::copy(spec.identifier.begin(), spec.identifier.end(), cd.begin() + ident);
  std::copy(spec.team.begin(), spec.team.end(), cd.begin() + team);
  for (uint32_t slot = 1; slot <= spec.special_slots; ++slot) {
    std::vector<uint8_t> hash(hash_size, 0);
    if (auto found = blobs.find(slot); found != blobs.end())
      hash = digest(spec.hash_type, found->second.data(), found->second.size());
    if (auto found = spec.external.find(slot); found != spec.external.end()) hash = found->second;
    std::copy(hash.begin(), hash.end(), cd.begin() + hash_offset - slot * hash_size);
  }
  for (uint64_t p = 0; p < pages; ++p) {
    uint64_t end = std::min((p + 1) * page, code_limit);
    std::vector<uint8_t> hash = digest(spec.hash_type, file.data() + p * page, end - p * page);
    std::copy(hash.begin(), hash.end(), cd.begin() + hash_offset + p * hash_size);
  }
  return cd;
}

std::vector<uint8_t> superblob(const std::vector<std::pair<uint32_t, std::vector<uint8_t>>>& blobs) {
  uint64_t offset = 12 + 8 * blobs.size();
  std::vector<uint8_t> out(offset);
  for (size_t i = 0; i < blobs.size(); ++i) {
    set_be32(out, 12 + 8 * i, blobs[i].first);
    set_be32(out, 16 + 8 * i, static_cast<uint32_t>(out.size()));
    out.insert(out.end(), blobs[i].second.begin(), blobs[i].second.end());
  }
  set_be32(out, 0, cs::kSuperBlobMagic);
  set_be32(out, 4, static_cast<uint32_t>(out.size()));
  set_be32(out, 8, static_cast<uint32_t>(blobs.size()));
  return out;
}

// Gives a signed file `datasize` bytes of signature space (zeroed), growing or
// shrinking __LINKEDIT as lld lays it out (vmsize = filesize).
void set_signature_space(std::vector<uint8_t>& file, uint64_t datasize) {
  MachO image = parse(file);
  const Segment* linkedit = image.segment("__LINKEDIT");
  REQUIRE(linkedit);
  uint64_t dataoff = image.code_signature.offset;
  uint64_t command = image.commands[*image.code_signature_command].offset;
  uint64_t segment = image.commands[linkedit->command_index].offset;
  file.resize(dataoff);
  file.resize(dataoff + datasize, 0);
  put_u32(file, command + 12, static_cast<uint32_t>(datasize));
  put_u64(file, segment + 32, dataoff + datasize - linkedit->file_offset);
  put_u64(file, segment + 48, dataoff + datasize - linkedit->file_offset);
}

// Which signature TestSigner writes.
struct Recipe {
  std::vector<CdSpec> directories = {CdSpec{}};    // slot 0, then 0x1000, 0x1001...
  std::map<uint32_t, std::vector<uint8_t>> blobs;  // other slots: requirements, entitlements, CMS
  uint64_t reserve = 0;                            // zero bytes after the SuperBlob
  // The exact signature space; 0: the SuperBlob and `reserve`, 16-aligned.
  uint64_t datasize = 0;
};

// Replaces the signature of an lld-signed file by the one `recipe` describes.
std::vector<uint8_t> test_sign(std::vector<uint8_t> file, const Recipe& recipe) {
  // Pass 1 sizes the SuperBlob (its size does not depend on hash values); the
  // header changes with the size, so the hashes come from pass 2.
  for (int pass = 0; pass < 2; ++pass) {
    uint64_t dataoff = signature_offset(file);
    std::vector<std::pair<uint32_t, std::vector<uint8_t>>> blobs;
    for (size_t i = 0; i < recipe.directories.size(); ++i)
      blobs.push_back({i == 0 ? 0u : 0x1000u + uint32_t(i - 1),
                       code_directory(file, dataoff, recipe.directories[i], recipe.blobs)});
    for (const auto& [slot, bytes] : recipe.blobs) blobs.push_back({slot, bytes});
    std::stable_sort(blobs.begin(), blobs.end(), [](auto& a, auto& b) { return a.first < b.first; });
    std::vector<uint8_t> signature = superblob(blobs);
    if (pass == 0) {
      set_signature_space(file, recipe.datasize ? recipe.datasize : (signature.size() + recipe.reserve + 15) / 16 * 16);
    } else {
      std::copy(signature.begin(), signature.end(), file.begin() + dataoff);
    }
  }
  return file;
}

std::vector<uint8_t> requirements_blob(const std::string& payload) { return blob(cs::kRequirementsMagic, payload); }

const std::vector<uint8_t> kEmptyRequirements = {0xfa, 0xde, 0x0c, 0x01, 0, 0, 0, 0x0c, 0, 0, 0, 0};
const std::vector<uint8_t> kEmptyCms = {0xfa, 0xde, 0x0b, 0x01, 0, 0, 0, 8};

std::vector<uint8_t> entitlements() {
  return blob(cs::kEntitlementsMagic,
              "<?xml version=\"1.0\"?><plist version=\"1.0\"><dict><key>com.apple.security.get-task-allow</key>"
              "<true/></dict></plist>");
}

// codesign -s - on a plain file with entitlements: CD (flags 0x2), requirements,
// entitlements, empty CMS.
Recipe codesign_adhoc_recipe() {
  Recipe recipe;
  recipe.directories[0].special_slots = 5;
  recipe.blobs[cs::kSlotRequirements] = kEmptyRequirements;
  recipe.blobs[cs::kSlotEntitlements] = entitlements();
  recipe.blobs[cs::kSlotCms] = kEmptyCms;
  return recipe;
}

}  // namespace

// ---------------------------------------------------------------------------
// Hashing

TEST_CASE("hash types: sizes, names, truncation") {
  CHECK(stored_hash_size(kHashSha1) == 20);
  CHECK(stored_hash_size(kHashSha256) == 32);
  CHECK(stored_hash_size(kHashSha256Truncated) == 20);
  CHECK(stored_hash_size(kHashSha384) == 48);
  CHECK(stored_hash_size(5) == 0);
  CHECK(hash_type_name(kHashSha256Truncated) == "sha256-truncated");
  std::vector<uint8_t> abc = {'a', 'b', 'c'};
  std::vector<uint8_t> sha256 = Hasher(kHashSha256).hash(Bytes(abc));
  CHECK(sha256[0] == 0xba);
  CHECK(sha256[31] == 0xad);
  std::vector<uint8_t> truncated = Hasher(kHashSha256Truncated).hash(Bytes(abc));
  CHECK(truncated == std::vector<uint8_t>(sha256.begin(), sha256.begin() + 20));
  CHECK(Hasher(kHashSha1).hash(Bytes(abc))[0] == 0xa9);
  CHECK(Hasher(kHashSha384).hash(Bytes(abc)).size() == 48);
  CHECK_THROWS_AS(Hasher(9), Error);
}

TEST_CASE("hash_pages: short last page, and two threads agree with one") {
  std::vector<uint8_t> data(3 * 1024 * 1024 + 100);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + (i >> 12));
  std::vector<uint8_t> one = hash_pages(Bytes(data), 4096, kHashSha256, 1);
  CHECK(one.size() == (data.size() / 4096 + 1) * 32);
  CHECK(hash_pages(Bytes(data), 4096, kHashSha256, 2) == one);
  CHECK(hash_pages(Bytes(data), 4096, kHashSha256) == one);
  std::vector<uint8_t> last = digest(2, data.data() + data.size() / 4096 * 4096, 100);
  CHECK(std::equal(last.begin(), last.end(), one.end() - 32));
  CHECK(hash_pages(Bytes(data.data(), 0), 4096, kHashSha256).empty());
}

// ---------------------------------------------------------------------------
// lld's signatures

TEST_CASE("verify accepts what ld64.lld signs, and renewing it changes nothing") {
  for (const auto& file : {lld_arm64_dylib(), lld_arm64_exec(), lld_x86_dylib_signed(), lld_x86_exec_signed()}) {
    MachO image = parse(file);
    std::optional<CodeSignature> signature = read_code_signature(image);
    REQUIRE(signature);
    CHECK(signature->style() == "linker-signed (lld)");
    CHECK(signature->linker_signed());
    CHECK(signature->hash_type_names() == std::vector<std::string>{"sha256"});
    CHECK(signature->page_size() == 4096);
    CHECK(!signature->has_cms);
    CHECK(verify_code_signature(image).empty());
    CHECK(check_code_signature(image).notes.empty());
    CHECK(renewed(file) == file);
  }
  std::optional<CodeSignature> exec = read_code_signature(parse(lld_arm64_exec()));
  CHECK(exec->identifier() == "main_arm64");  // lld 16: the output file's name
  CHECK(exec->primary().exec_seg_flags == cs::kExecSegMainBinary);
  CHECK(read_code_signature(parse(lld_arm64_dylib()))->primary().exec_seg_flags == 0);
}

TEST_CASE("an unsigned slice") {
  std::vector<uint8_t> file = lld_x86_dylib_unsigned();
  CHECK(!read_code_signature(parse(file)));
  CHECK(verify(file) == std::vector<std::string>{"not signed"});
  CHECK(contains(error_of([&] { renew_code_signature(file, 0); }).problem(), "not signed"));
}

TEST_CASE("a changed byte is reported with its page and file range; renew re-seals it") {
  std::vector<uint8_t> file = lld_arm64_dylib();
  file[0x2345] ^= 0x40;
  CHECK(verify(file) ==
        std::vector<std::string>{"CodeDirectory sha256: page 2 (slice bytes 0x2000-0x3000) hash mismatch"});
  std::vector<uint8_t> fixed = renewed(file);
  CHECK(verify(fixed).empty());
  CHECK(fixed[0x2345] == file[0x2345]);
}

TEST_CASE("zeroed or foreign code hashes: verify names every page, renew restores lld's bytes") {
  const std::vector<uint8_t> original = lld_arm64_dylib();
  uint64_t dataoff = signature_offset(original);
  const CodeDirectory cd = read_code_signature(parse(original))->primary();
  uint64_t hashes = dataoff + kLldCd + cd.hash_offset;

  SUBCASE("zeros") {
    std::vector<uint8_t> file = original;
    std::fill(file.begin() + hashes, file.begin() + hashes + cd.code_slots * 32, 0);
    std::vector<std::string> problems = verify(file);
    REQUIRE(problems.size() == cd.code_slots);
    CHECK(problems[0] == "CodeDirectory sha256: page 0 (slice bytes 0x0-0x1000) hash mismatch");
    CHECK(problems.back() == "CodeDirectory sha256: page " + std::to_string(cd.code_slots - 1) + " (slice bytes " +
                                 hex((cd.code_slots - 1) * 4096) + "-" + hex(dataoff) + ") hash mismatch");
    CHECK(renewed(file) == original);
  }
  SUBCASE("another file's hashes") {
    std::vector<uint8_t> other = lld_arm64_exec();
    const CodeDirectory other_cd = read_code_signature(parse(other))->primary();
    uint64_t other_hashes = signature_offset(other) + kLldCd + other_cd.hash_offset;
    uint64_t count = std::min(cd.code_slots, other_cd.code_slots);
    std::vector<uint8_t> file = original;
    std::copy(other.begin() + other_hashes, other.begin() + other_hashes + count * 32, file.begin() + hashes);
    std::vector<std::string> problems = verify(file);
    CHECK(!problems.empty());
    for (const std::string& problem : problems) CHECK(contains(problem, "hash mismatch"));
    CHECK(renewed(file) == original);
  }
}

TEST_CASE("many mismatching pages are listed up to a limit, then counted (large file, two threads)") {
  const std::vector<uint8_t> original = Fixtures::get().link("large_arm64.dylib", "large", "arm64", "dylib");
  CHECK(verify(original).empty());
  const CodeDirectory cd = read_code_signature(parse(original))->primary();
  REQUIRE(cd.code_slots > 600);
  std::vector<uint8_t> file = original;
  uint64_t hashes = signature_offset(file) + kLldCd + cd.hash_offset;
  std::fill(file.begin() + hashes, file.begin() + hashes + cd.code_slots * 32, 0);
  std::vector<std::string> problems = verify(file);
  REQUIRE(problems.size() == 33);
  CHECK(problems.back() == "CodeDirectory sha256: " + std::to_string(cd.code_slots - 32) +
                               " more pages with a hash mismatch (" + std::to_string(cd.code_slots) + " of " +
                               std::to_string(cd.code_slots) + " in all)");
  CHECK(renewed(file) == original);
}

TEST_CASE("llvm-install-name-tool's re-signed output verifies, and renewing it is a no-op") {
  fs::path path = Fixtures::get().dir() / "rpath.dylib";
  write_file(path, lld_arm64_dylib());
  run("llvm-install-name-tool-16 -add_rpath @loader_path/../lib " + path.string());
  std::vector<uint8_t> file = read_file(path);
  CHECK(file != lld_arm64_dylib());
  CHECK(verify(file).empty());
  CHECK(read_code_signature(parse(file))->identifier() == "rpath.dylib");  // objcopy: the output name
  CHECK(read_code_signature(parse(file))->style() == "linker-signed (lld)");
  CHECK(renewed(file) == file);
}

TEST_CASE("codeLimit and placement are checked") {
  std::vector<uint8_t> file = lld_arm64_dylib();
  uint64_t dataoff = signature_offset(file);
  SUBCASE("codeLimit short of the signature") {
    set_be32(file, dataoff + kLldCd + 32, static_cast<uint32_t>(dataoff - 0x10));
    std::vector<std::string> problems = verify(file);
    REQUIRE(!problems.empty());
    CHECK(problems[0] ==
          "CodeDirectory sha256: codeLimit " + hex(dataoff - 0x10) + " is not the signature offset " + hex(dataoff));
    CHECK(renewed(file) == lld_arm64_dylib());  // renew puts codeLimit back
  }
  SUBCASE("signature outside __LINKEDIT") {
    MachO image = parse(file);
    uint64_t segment = image.commands[image.segment("__LINKEDIT")->command_index].offset;
    put_u64(file, segment + 48, dataoff - image.segment("__LINKEDIT")->file_offset);  // filesize ends at dataoff
    // The reader itself refuses LINKEDIT data outside __LINKEDIT, naming the dataoff field.
    Error error = error_of([&] { parse(file); });
    CHECK(contains(error.problem(), "LC_CODE_SIGNATURE at " + hex(dataoff) + " lies outside __LINKEDIT"));
    CHECK(error.offset() == image.commands[*image.code_signature_command].offset + 8);
  }
}

// ---------------------------------------------------------------------------
// Malformed signatures: an Error with the absolute offset of the bad field.

TEST_CASE("malformed signatures are errors naming the offset") {
  const std::vector<uint8_t> original = lld_arm64_dylib();
  const uint64_t dataoff = signature_offset(original);
  const uint64_t cd = dataoff + kLldCd;
  const uint32_t datasize = static_cast<uint32_t>(parse(original).code_signature.size);
  std::vector<uint8_t> file = original;
  auto read_error = [&] { return error_of([&] { read_code_signature(parse(file)); }); };

  SUBCASE("SuperBlob length larger than datasize") {
    set_be32(file, dataoff + 4, datasize + 0x10);
    Error error = read_error();
    CHECK(error.problem() == "SuperBlob length " + hex(datasize + 0x10) + " exceeds datasize " + hex(datasize));
    CHECK(error.offset() == dataoff + 4);
    // verify reports it as a problem instead of throwing
    CHECK(verify(file) == std::vector<std::string>{error.describe()});
  }
  SUBCASE("bad magic") {
    set_be32(file, dataoff, 0xfade0c02);
    CHECK(read_error().offset() == dataoff);
  }
  SUBCASE("count too big for the length") {
    set_be32(file, dataoff + 8, 1000);
    Error error = read_error();
    CHECK(contains(error.problem(), "SuperBlob count 1000"));
    CHECK(error.offset() == dataoff + 8);
  }
  SUBCASE("blob offset outside the SuperBlob") {
    set_be32(file, dataoff + 16, datasize);
    CHECK(read_error().offset() == dataoff + 16);
  }
  SUBCASE("blob length past the SuperBlob") {
    set_be32(file, cd + 4, datasize);
    Error error = read_error();
    CHECK(contains(error.problem(), "runs past the SuperBlob length"));
    CHECK(error.offset() == cd + 4);
  }
  SUBCASE("hashOffset out of range") {
    set_be32(file, cd + 16, be32(file, cd + 4) + 4);
    Error error = read_error();
    CHECK(contains(error.problem(), "hashOffset"));
    CHECK(error.offset() == cd + 16);
  }
  SUBCASE("code slots past the end") {
    set_be32(file, cd + 28, be32(file, cd + 28) + 1);
    Error error = read_error();
    CHECK(contains(error.problem(), "code slots do not fit"));
    CHECK(error.offset() == cd + 28);
  }
  SUBCASE("special slots before hashOffset") {
    set_be32(file, cd + 24, 4);  // 4 * 32 > hashOffset 0x68
    CHECK(read_error().offset() == cd + 24);
  }
  SUBCASE("special slots overlapping the header") {
    set_be32(file, cd + 24, 1);  // hashOffset 0x68 - 32 reaches into the 88-byte header
    Error error = read_error();
    CHECK(contains(error.problem(), "overlap the 88-byte header"));
    CHECK(error.offset() == cd + 16);
  }
  SUBCASE("unknown hash type") {
    file[cd + 37] = 9;
    Error error = read_error();
    CHECK(error.problem() == "CodeDirectory in slot 0x0: unknown hash type 9");
    CHECK(error.offset() == cd + 37);
  }
  SUBCASE("hash size does not match the type") {
    file[cd + 36] = 20;
    Error error = read_error();
    CHECK(error.problem() == "CodeDirectory sha256: hash size 20 does not match sha256 (32)");
    CHECK(error.offset() == cd + 36);
  }
  SUBCASE("page size the kernel rejects") {
    file[cd + 39] = 16;
    CHECK(read_error().offset() == cd + 39);
  }
  SUBCASE("identifier not NUL-terminated") {
    uint32_t length = be32(file, cd + 4);
    set_be32(file, cd + 20, length - 4);
    std::fill(file.begin() + cd + length - 4, file.begin() + cd + length, 'x');
    Error error = read_error();
    CHECK(error.problem() == "CodeDirectory identifier is not NUL-terminated");
    CHECK(error.offset() == cd + length - 4);
  }
  SUBCASE("unsupported version") {
    set_be32(file, cd + 8, 0x10000);
    CHECK(read_error().offset() == cd + 8);
  }
  SUBCASE("datasize too small for a SuperBlob header") {
    MachO image = parse(file);
    put_u32(file, image.commands[*image.code_signature_command].offset + 12, 8);
    CHECK(read_error().offset() == dataoff);
  }
}

TEST_CASE("malformed SuperBlobs built by hand") {
  const std::vector<uint8_t> lld = lld_arm64_dylib();
  SUBCASE("two CodeDirectories with one hash type") {
    Recipe recipe;
    recipe.directories.push_back(CdSpec{});  // sha256 again, in slot 0x1000
    std::vector<uint8_t> file = test_sign(lld, recipe);
    uint64_t dataoff = signature_offset(file);
    Error error = error_of([&] { read_code_signature(parse(file)); });
    CHECK(error.problem() == "CodeDirectories in slots 0x0 and 0x1000 both use sha256");
    CHECK(error.offset() == dataoff + be32(file, dataoff + 24));  // the second CD
  }
  SUBCASE("a CodeDirectory outside the CodeDirectory slots") {
    Recipe recipe;
    recipe.blobs[3] = blob(cs::kCodeDirectoryMagic, std::string(100, '\0'));
    std::vector<uint8_t> file = test_sign(lld, recipe);
    CHECK(contains(error_of([&] { read_code_signature(parse(file)); }).problem(),
                   "only slots 0 and 0x1000-0x1004 hold CodeDirectories"));
  }
  SUBCASE("a blob with the wrong magic for its slot") {
    Recipe recipe;
    recipe.blobs[cs::kSlotEntitlements] = kEmptyRequirements;
    std::vector<uint8_t> file = test_sign(lld, recipe);
    CHECK(contains(error_of([&] { read_code_signature(parse(file)); }).problem(),
                   "has magic 0xfade0c01 instead of 0xfade7171"));
  }
  SUBCASE("no CodeDirectory in slot 0") {
    std::vector<uint8_t> file = test_sign(lld, Recipe{});
    set_be32(file, signature_offset(file) + 12, 0x1000);  // move it to an alternate slot
    CHECK(contains(error_of([&] { read_code_signature(parse(file)); }).problem(), "no CodeDirectory in slot 0"));
  }
}

// ---------------------------------------------------------------------------
// codesign-style, agile and identity signatures

TEST_CASE("a codesign ad hoc signature with entitlements: verify, renew no-op, re-seal a changed blob") {
  const std::vector<uint8_t> file = test_sign(lld_arm64_dylib(), codesign_adhoc_recipe());
  std::optional<CodeSignature> signature = read_code_signature(parse(file));
  REQUIRE(signature);
  CHECK(signature->style() == "ad hoc (codesign)");
  CHECK(signature->has_cms);
  CHECK(!signature->has_identity);
  CHECK(signature->blobs.size() == 4);
  CHECK(verify(file).empty());
  CHECK(renewed(file) == file);

  // Edit the entitlements in place (same length): slot 5 no longer matches.
  std::vector<uint8_t> edited = file;
  const SignatureBlob* ent = signature->blob_in_slot(cs::kSlotEntitlements);
  edited[signature->offset + ent->offset + ent->length - 3] = 'X';
  uint64_t ent_at = signature->offset + ent->offset;
  CHECK(verify(edited) == std::vector<std::string>{"CodeDirectory sha256: special slot 5 (entitlements) hash mismatch "
                                                   "(its blob: slice bytes " +
                                                   hex(ent_at) + "-" + hex(ent_at + ent->length) + ")"});
  CHECK(check_code_signature(parse(edited)).first_problem_at == ent_at);
  std::vector<uint8_t> resealed = renewed(edited);
  CHECK(verify(resealed).empty());

  // A zeroed requirements hash is named too.
  std::vector<uint8_t> zeroed = file;
  const CodeDirectory& cd = signature->primary();
  uint64_t slot2 = signature->offset + cd.offset + cd.hash_offset - 2 * 32;
  std::fill(zeroed.begin() + slot2, zeroed.begin() + slot2 + 32, 0);
  uint64_t requirements_at = signature->offset + signature->blob_in_slot(cs::kSlotRequirements)->offset;
  CHECK(verify(zeroed) == std::vector<std::string>{"CodeDirectory sha256: special slot 2 (requirements) hash mismatch "
                                                   "(its blob: slice bytes " +
                                                   hex(requirements_at) + "-" + hex(requirements_at + 12) + ")"});
  CHECK(renewed(zeroed) == file);
}

TEST_CASE("a blob the CodeDirectory does not seal is a problem") {
  Recipe recipe;  // special_slots = 0, but a requirements blob is present
  recipe.blobs[cs::kSlotRequirements] = kEmptyRequirements;
  std::vector<uint8_t> file = test_sign(lld_arm64_dylib(), recipe);
  CHECK(verify(file) == std::vector<std::string>{
                            "CodeDirectory sha256: the blob in special slot 2 (requirements) is not sealed (only 0 "
                            "special slots)"});
}

TEST_CASE("Info.plist and resources hashes are not checkable here, not invalid, and renew keeps them") {
  Recipe recipe = codesign_adhoc_recipe();
  recipe.directories[0].external[cs::kSlotInfoPlist] = std::vector<uint8_t>(32, 0x11);
  recipe.directories[0].external[cs::kSlotResources] = std::vector<uint8_t>(32, 0x33);
  std::vector<uint8_t> file = test_sign(lld_arm64_dylib(), recipe);
  SignatureCheck check = check_code_signature(parse(file));
  CHECK(check.problems.empty());
  REQUIRE(check.notes.size() == 2);
  CHECK(contains(check.notes[0], "special slot 1 (Info.plist) seals a file outside the Mach-O"));
  CHECK(contains(check.notes[1], "special slot 3 (resources)"));
  CHECK(renewed(file) == file);
}

TEST_CASE("agile signature (SHA-1 in slot 0, SHA-256 in 0x1000), as ld64 writes for old targets") {
  Recipe recipe = codesign_adhoc_recipe();
  recipe.directories[0].hash_type = kHashSha1;
  recipe.directories.push_back(recipe.directories[0]);
  recipe.directories[1].hash_type = kHashSha256;
  const std::vector<uint8_t> file = test_sign(lld_arm64_dylib(), recipe);
  std::optional<CodeSignature> signature = read_code_signature(parse(file));
  REQUIRE(signature);
  CHECK(signature->hash_type_names() == std::vector<std::string>{"sha1", "sha256"});
  CHECK(verify(file).empty());
  CHECK(renewed(file) == file);

  std::vector<uint8_t> flipped = file;
  flipped[0x1001] ^= 1;
  CHECK(verify(flipped) ==
        std::vector<std::string>{"CodeDirectory sha1: page 1 (slice bytes 0x1000-0x2000) hash mismatch",
                                 "CodeDirectory sha256: page 1 (slice bytes 0x1000-0x2000) hash mismatch"});
  CHECK(verify(renewed(flipped)).empty());
}

TEST_CASE("16 KiB pages and SHA-384") {
  Recipe recipe;
  recipe.directories[0].page_shift = 14;
  recipe.directories[0].hash_type = kHashSha384;
  const std::vector<uint8_t> file = test_sign(lld_arm64_dylib(), recipe);
  CHECK(read_code_signature(parse(file))->page_size() == 16384);
  CHECK(verify(file).empty());
  std::vector<uint8_t> flipped = file;
  flipped[0x4001] ^= 1;
  CHECK(verify(flipped) ==
        std::vector<std::string>{"CodeDirectory sha384: page 1 (slice bytes 0x4000-0x8000) hash mismatch"});
  CHECK(renewed(flipped) != flipped);
  CHECK(verify(renewed(flipped)).empty());
}

TEST_CASE("ld64-style linker signature: identifier right after the header") {
  Recipe recipe;
  recipe.directories[0].flags = cs::kFlagAdhoc | cs::kFlagLinkerSigned;
  std::vector<uint8_t> file = test_sign(lld_arm64_dylib(), recipe);
  CHECK(read_code_signature(parse(file))->style() == "linker-signed (ld64)");
  CHECK(verify(file).empty());
}

namespace {

// A Developer ID signature as codesign writes it (hardened runtime, team id,
// a designated requirement, entitlements, a CMS signature), with room to spare.
Recipe identity_recipe() {
  Recipe recipe;
  CdSpec& cd = recipe.directories[0];
  cd.flags = cs::kFlagRuntime;
  cd.team = "ABCDE12345";
  cd.identifier = "com.example.libfoo";
  cd.special_slots = 5;
  recipe.blobs[cs::kSlotRequirements] = requirements_blob(std::string(40, '\x07'));
  recipe.blobs[cs::kSlotEntitlements] = entitlements();
  recipe.blobs[cs::kSlotCms] = blob(cs::kCmsWrapperMagic, std::string(3000, '\x42'));
  recipe.reserve = 1000;
  return recipe;
}

}  // namespace

TEST_CASE("an identity signature is not renewed; --adhoc replaces it with codesign's ad hoc layout") {
  std::vector<uint8_t> file = test_sign(lld_arm64_dylib(), identity_recipe());
  std::optional<CodeSignature> signature = read_code_signature(parse(file));
  REQUIRE(signature);
  CHECK(signature->has_identity);
  CHECK(signature->style() == "identity (CMS)");
  CHECK(signature->primary().team_id == "ABCDE12345");
  CHECK(verify(file).empty());
  CHECK(check_code_signature(parse(file)).notes ==
        std::vector<std::string>{"the CMS signature (identity) is not checked"});
  CHECK(error_of([&] { renew_code_signature(file, 0); }).problem() ==
        "signed with an identity (Developer ID?): cannot be renewed; pass --adhoc to replace it with an ad hoc "
        "signature");

  std::vector<uint8_t> replaced = file;
  replace_with_adhoc_signature(replaced, 0);
  CHECK(replaced.size() == file.size());
  CHECK(verify(replaced).empty());
  std::optional<CodeSignature> adhoc = read_code_signature(parse(replaced));
  CHECK(adhoc->style() == "ad hoc (codesign)");
  CHECK(adhoc->primary().flags == (cs::kFlagRuntime | cs::kFlagAdhoc));
  CHECK(adhoc->primary().team_id.empty());
  CHECK(adhoc->identifier() == "com.example.libfoo");
  CHECK(adhoc->size == signature->size);  // same space

  // Exactly what codesign -s - --options runtime --entitlements writes, zero padded.
  Recipe expected_recipe = codesign_adhoc_recipe();
  expected_recipe.directories[0].flags = cs::kFlagRuntime | cs::kFlagAdhoc;
  expected_recipe.directories[0].identifier = "com.example.libfoo";
  expected_recipe.datasize = signature->size;  // the identity's space, zero padded
  std::vector<uint8_t> expected = test_sign(file, expected_recipe);
  CHECK(expected == replaced);
  uint64_t dataoff = signature->offset;
  std::vector<uint8_t> want(expected.begin() + dataoff, expected.begin() + dataoff + be32(expected, dataoff + 4));
  std::vector<uint8_t> got(replaced.begin() + dataoff, replaced.begin() + dataoff + be32(replaced, dataoff + 4));
  CHECK(got == want);
  CHECK(std::all_of(replaced.begin() + dataoff + got.size(), replaced.end(), [](uint8_t b) { return b == 0; }));
  // Pages and header: identical to the input (only the signature changed).
  CHECK(std::equal(file.begin(), file.begin() + dataoff, replaced.begin()));
}

TEST_CASE("replace_with_adhoc_signature fails clearly when the ad hoc one does not fit") {
  Recipe recipe = identity_recipe();
  recipe.blobs[cs::kSlotCms] = blob(cs::kCmsWrapperMagic, "x");  // a 9-byte CMS: still an identity
  recipe.blobs[cs::kSlotRequirements] = requirements_blob("");   // 8 bytes, the ad hoc one has 12
  recipe.directories[0].team.clear();                            // dropping it would free 11 bytes
  recipe.reserve = 0;
  std::vector<uint8_t> file = test_sign(lld_arm64_dylib(), recipe);
  recipe.datasize = be32(file, signature_offset(file) + 4);  // no room to spare at all
  file = test_sign(file, recipe);
  REQUIRE(read_code_signature(parse(file))->has_identity);
  CHECK(contains(error_of([&] { replace_with_adhoc_signature(file, 0); }).problem(),
                 "does not fit in the LC_CODE_SIGNATURE space"));
}

// ---------------------------------------------------------------------------
// Adding a signature

namespace {

// Undoes what ld64.lld -adhoc_codesign adds: the last load command
// (LC_CODE_SIGNATURE), the signature, and __LINKEDIT's growth.
std::vector<uint8_t> strip_lld_signature(std::vector<uint8_t> file) {
  MachO image = parse(file);
  REQUIRE(image.code_signature_command == image.commands.size() - 1);
  uint64_t dataoff = image.code_signature.offset;
  const Segment* linkedit = image.segment("__LINKEDIT");
  uint64_t segment = image.commands[linkedit->command_index].offset;
  uint64_t command = image.commands.back().offset;
  std::fill(file.begin() + command, file.begin() + command + 16, 0);
  put_u32(file, 16, image.ncmds - 1);
  put_u32(file, 20, image.sizeofcmds - 16);
  put_u64(file, segment + 32, dataoff - linkedit->file_offset);
  put_u64(file, segment + 48, dataoff - linkedit->file_offset);
  file.resize(dataoff);
  return file;
}

}  // namespace

TEST_CASE("add_adhoc_signature writes exactly what ld64.lld writes for the same layout") {
  struct Case {
    std::vector<uint8_t> signed_by_lld;
    std::string identifier;
  };
  for (const Case& c :
       {Case{lld_x86_dylib_signed(), "lib_x86_64_signed.dylib"}, Case{lld_x86_exec_signed(), "main_x86_64_signed"},
        Case{lld_arm64_dylib(), "lib_arm64.dylib"}, Case{lld_arm64_exec(), "main_arm64"}}) {
    INFO(c.identifier);
    std::vector<uint8_t> unsigned_file = strip_lld_signature(c.signed_by_lld);
    CHECK(!read_code_signature(parse(unsigned_file)));
    std::vector<uint8_t> signed_file = add_adhoc_signature(parse(unsigned_file), c.identifier);
    CHECK(signed_file == c.signed_by_lld);
  }
}

TEST_CASE("replace_unreadable_signature: a corrupt lld signature becomes exactly what ld64.lld wrote") {
  struct Case {
    std::vector<uint8_t> signed_by_lld;
    std::string identifier;
  };
  for (const Case& c : {Case{lld_arm64_dylib(), "lib_arm64.dylib"}, Case{lld_x86_exec_signed(), "main_x86_64_signed"}}) {
    INFO(c.identifier);
    std::vector<uint8_t> corrupt = c.signed_by_lld;
    corrupt[signature_offset(corrupt) + kLldCd + 3] ^= 0x01;  // CodeDirectory magic
    CHECK_THROWS_AS(read_code_signature(parse(corrupt)), Error);
    CHECK(replace_unreadable_signature(parse(corrupt), c.identifier) == c.signed_by_lld);
  }
}

TEST_CASE("replace_unreadable_signature refuses a signature that does not end the slice") {
  std::vector<uint8_t> file = lld_arm64_dylib();
  file.resize(file.size() + 16, 0);  // bytes after the signature (and after __LINKEDIT)
  CHECK(contains(error_of([&] { replace_unreadable_signature(parse(file), "x"); }).problem(),
                 "does not end both __LINKEDIT and the slice"));
}

TEST_CASE("the first problem's file offset: the page, the malformed field; none when valid") {
  std::vector<uint8_t> file = lld_arm64_dylib();
  CHECK(!check_code_signature(parse(file)).first_problem_at);
  file[0x2345] ^= 0x40;
  file[0x3456] ^= 0x40;
  const uint64_t base = 0x10000;  // as in a universal file or a .pte: offsets are the file's
  CHECK(check_code_signature(parse_macho(Bytes(file.data(), file.size(), base))).first_problem_at == base + 0x2000);
  std::vector<uint8_t> corrupt = lld_arm64_dylib();
  uint64_t cd_magic = signature_offset(corrupt) + kLldCd;
  corrupt[cd_magic + 3] ^= 0x01;
  SignatureCheck check = check_code_signature(parse_macho(Bytes(corrupt.data(), corrupt.size(), base)));
  CHECK(check.first_problem_at == base + cd_magic);
}

TEST_CASE("add_adhoc_signature on lld's unsigned x86_64 link") {
  const std::vector<uint8_t> unsigned_file = lld_x86_dylib_unsigned();
  const std::vector<uint8_t> lld_signed = lld_x86_dylib_signed();
  std::vector<uint8_t> file = add_adhoc_signature(parse(unsigned_file), "lib_x86_64_signed.dylib");
  CHECK(verify(file).empty());
  CHECK(renewed(file) == file);
  std::optional<CodeSignature> ours = read_code_signature(parse(file));
  std::optional<CodeSignature> theirs = read_code_signature(parse(lld_signed));
  CHECK(ours->style() == "linker-signed (lld)");
  // Same size and place; lld's own link differs only because it laid the sections
  // out 16 bytes later (it reserved the load command before placing them), so the
  // page hashes differ and so do the section offsets in the header.
  CHECK(file.size() == lld_signed.size());
  CHECK(ours->offset == theirs->offset);
  CHECK(ours->size == theirs->size);
  const CodeDirectory& cd = ours->primary();
  uint64_t hashes = ours->offset + kLldCd + cd.hash_offset;
  CHECK(std::equal(file.begin() + ours->offset, file.begin() + hashes, lld_signed.begin() + ours->offset));
}

TEST_CASE("add_adhoc_signature refuses what it cannot do") {
  CHECK(contains(error_of([&] { add_adhoc_signature(parse(lld_arm64_dylib()), "x"); }).problem(), "already signed"));
  std::vector<uint8_t> no_room =
      Fixtures::get().link("lib_x86_64_nopad.dylib", "lib", "x86_64", "dylib", "-headerpad 0");
  CHECK(contains(error_of([&] { add_adhoc_signature(parse(no_room), "x"); }).problem(),
                 "no room in the header for LC_CODE_SIGNATURE"));
  CHECK_THROWS_AS(add_adhoc_signature(parse(lld_x86_dylib_unsigned()), ""), Error);
}

TEST_CASE("default_identifier: the install name's leaf, else the file name") {
  CHECK(default_identifier(parse(lld_arm64_dylib()), "/tmp/whatever.so") == "liblib.dylib");
  CHECK(default_identifier(parse(lld_arm64_exec()), "/usr/local/bin/tool") == "tool");
  CHECK(default_identifier(parse(lld_arm64_exec()), "tool") == "tool");
}

TEST_CASE("random corruption of a signature gives an Error or a verdict, never anything else") {
  const std::vector<uint8_t> originals[] = {lld_arm64_dylib(), test_sign(lld_arm64_dylib(), identity_recipe())};
  uint64_t state = 0x9e3779b97f4a7c15ull;  // fixed seed: failures reproduce
  auto next = [&state] {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return state;
  };
  for (const std::vector<uint8_t>& original : originals) {
    const uint64_t dataoff = signature_offset(original);
    const uint64_t length = be32(original, dataoff + 4);
    for (int round = 0; round < 1500; ++round) {
      std::vector<uint8_t> file = original;
      // Mostly the headers, where the structure lives; sometimes anywhere in the SuperBlob.
      uint64_t span = round % 4 == 0 ? length : std::min<uint64_t>(length, 160);
      for (uint64_t flips = 1 + next() % 3; flips > 0; --flips) file[dataoff + next() % span] = next() & 0xff;
      try {
        check_code_signature(parse(file));
        std::vector<uint8_t> renewed_file = file;
        renew_code_signature(renewed_file, 0);
        std::vector<uint8_t> replaced = file;
        replace_with_adhoc_signature(replaced, 0);
        CHECK(verify(replaced).empty());
      } catch (const Error&) {
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Re-signing a rewrite hashes what changed: VerifiedInputHashes

namespace {

// Counts the pages whose hash VerifiedInputHashes gives.
class CountingHashes : public KnownPageHashes {
 public:
  explicit CountingHashes(const KnownPageHashes& inner) : inner_(inner) {}
  const uint8_t* find(const uint8_t* page, uint64_t length, uint64_t index, uint64_t page_size,
                      uint8_t hash_type) const override {
    const uint8_t* found = inner_.find(page, length, index, page_size, hash_type);
    found_ += found != nullptr;
    return found;
  }
  uint64_t found() const { return found_; }

 private:
  const KnownPageHashes& inner_;
  mutable std::atomic<uint64_t> found_{0};
};

}  // namespace

TEST_CASE("a verified input's hashes serve the pages an output borrows from it, and no other") {
  Fixtures::get().link("large_arm64.dylib", "large", "arm64", "dylib");  // lld signs arm64 ad hoc
  MappedFile file((Fixtures::get().dir() / "large_arm64.dylib").string());
  MachO input = parse_macho(file.bytes());
  std::optional<CodeSignature> signature = read_code_signature(input);
  REQUIRE(signature);
  REQUIRE(check_code_signature(input).problems.empty());
  const Segment* linkedit = input.segment("__LINKEDIT");
  REQUIRE(linkedit);
  OutputImage output = OutputImage::borrowing(file.bytes(), 4096, linkedit->file_offset, 0);
  REQUIRE(output.borrowed_size() > 2000000);
  VerifiedInputHashes verified(input, *signature);
  CountingHashes counting(verified);
  uint64_t code_limit = signature->primary().code_limit;

  // Borrowed pages take the stored hashes, which equal what hashing them gives.
  Bytes code = output.bytes().sub(0, code_limit, "code");
  CHECK(hash_pages(code, 4096, kHashSha256, 0, &counting) == hash_pages(code, 4096, kHashSha256));
  CHECK(counting.found() == output.borrowed_size() / 4096);

  // A copy of the same bytes is hashed: only pages that map the input's very bytes count.
  std::vector<uint8_t> copy = output.to_vector();
  CountingHashes on_copy(verified);
  hash_pages(Bytes(copy).sub(0, code_limit, "code"), 4096, kHashSha256, 0, &on_copy);
  CHECK(on_copy.found() == 0);

  // A renewal with them after the head changed: page 0 is hashed again, and the
  // signature checks without any help.
  output.data()[input.load_commands_end()] ^= 0x01;  // header padding
  renew_code_signature(output, 0, &verified);
  MachO renewed = parse_macho(output.bytes());
  CHECK(check_code_signature(renewed).problems.empty());
  CHECK(check_code_signature(renewed, &verified).problems.empty());
}

// ---------------------------------------------------------------------------
// Checking a new signature hashes again what the signer's hashing cannot vouch for:
// HashedPages

namespace {

// lld leaves x86_64 unsigned: `sign` adds a signature to it.
MappedFile large_unsigned_dylib() {
  Fixtures::get().link("large_x86_64.dylib", "large", "x86_64", "dylib");
  return MappedFile((Fixtures::get().dir() / "large_x86_64.dylib").string());
}

}  // namespace

TEST_CASE("a new signature's own hashes serve its check for the borrowed pages, and no other") {
  MappedFile file = large_unsigned_dylib();
  MachO input = parse_macho(file.bytes());
  REQUIRE(!input.code_signature.present);
  const Segment* linkedit = input.segment("__LINKEDIT");
  REQUIRE(linkedit);
  OutputImage output = OutputImage::borrowing(file.bytes(), 4096, linkedit->file_offset,
                                              adhoc_signature_room(file.bytes().size(), "large"));
  REQUIRE(output.borrowed_size() > 2000000);
  HashedPages hashed = add_adhoc_signature(output, 0, "large");
  MachO signed_image = parse_macho(output.bytes());

  // The borrowed pages take the signer's hashes; the header page and __LINKEDIT are hashed.
  CountingHashes counting(hashed);
  CHECK(check_code_signature(signed_image, &counting).problems.empty());
  CHECK(counting.found() == output.borrowed_size() / 4096);

  // Only the very page hashed, as it was hashed.
  const uint8_t* page = output.bytes().data() + 2 * 4096;  // borrowed
  CHECK(hashed.find(page, 4096, 2, 4096, kHashSha256) != nullptr);
  CHECK(hashed.find(page, 4096, 3, 4096, kHashSha256) == nullptr);         // another index
  CHECK(hashed.find(page + 4096, 4096, 2, 4096, kHashSha256) == nullptr);  // another page at that index
  CHECK(hashed.find(page, 2048, 2, 4096, kHashSha256) == nullptr);         // another length
  CHECK(hashed.find(page, 4096, 2, 4096, kHashSha1) == nullptr);           // another type
  const uint8_t* page_1 = output.bytes().data() + 4096;  // borrowed too
  CHECK(hashed.find(page_1, 4096, 1, 4096, kHashSha256) != nullptr);
  CHECK(hashed.find(page_1, 4096, 1, 16384, kHashSha256) == nullptr);  // another page size

  // A copy of the same bytes is hashed: it is not what the signer hashed.
  std::vector<uint8_t> copy = output.to_vector();
  CountingHashes on_copy(hashed);
  CHECK(check_code_signature(parse_macho(Bytes(copy)), &on_copy).problems.empty());
  CHECK(on_copy.found() == 0);

  // A private page written after the signer hashed it is hashed again.
  uint8_t* padding = output.data() + signed_image.load_commands_end();
  *padding ^= 0x01;
  CHECK(check_code_signature(parse_macho(output.bytes()), &hashed).first_problem_at == 0);
  *padding ^= 0x01;

  // A wrong hash stored for a borrowed page is found: the check compares what the
  // signature stores with the page's hash.
  std::optional<CodeSignature> signature = read_code_signature(signed_image);
  REQUIRE(signature);
  const CodeDirectory& directory = signature->primary();
  output.data()[signature->offset + directory.offset + directory.hash_offset + 2 * directory.hash_size] ^= 0x01;
  CHECK(check_code_signature(parse_macho(output.bytes()), &hashed).first_problem_at == 2 * 4096);
}

TEST_CASE("sign of an unsigned slice hashes its code once, and again only what it does not borrow") {
  MappedFile file = large_unsigned_dylib();
  RepairOptions options = test::checked();
  options.sign_unsigned = true;
  uint64_t before = page_bytes_hashed();
  MachORepair repair = sign_macho(file.bytes(), options);
  uint64_t hashed = page_bytes_hashed() - before;
  REQUIRE(repair.report.slices.size() == 1);
  CHECK(repair.report.slices[0].signature_after.status == SignatureStatus::Added);
  uint64_t size = file.bytes().size();
  CHECK(hashed >= size);           // the signer hashed every page
  CHECK(hashed < size + size / 8);  // the check hashed the header page and __LINKEDIT again, not the code
}
