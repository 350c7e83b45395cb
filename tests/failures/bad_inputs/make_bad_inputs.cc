// Crafts the bad-input corpus from the committed table tests/failures/bad_inputs/cases.txt.
//
//   make_bad_inputs CASES OUTDIR
//
// For each case: takes a valid base file, applies the recipe's edits, writes
// OUTDIR/<name>.<ext>, and appends to OUTDIR/manifest.tsv one line
//   name \t file \t offset \t requires
// with the expected offset (the table's expression, resolved on the base) in hex,
// or "none". Every base is made here (tests/support/macho_builder.h, the test .pte
// writer); a case whose base this build cannot make is written with
// requires = "missing:<why>", which the runner counts as a failure.
//
// Table: one case per line, columns separated by '|', '#' starts a comment line:
//   name | recipe | prune exit | inspect exit | expected message substring | expected offset
// recipe: BASE EDIT...  with EDIT one of
//   cut=E            keep the first E bytes
//   u8@E=V u16@E=V u32@E=V u64@E=V   little-endian stores
//   be32@E=V be64@E=V                big-endian stores (fat headers, signatures)
//   copy@E=S:L       copy L bytes from S to E (duplicate commands, overlapping slices)
//   grow=E           append E zero bytes
// Expressions (E, V, S, L, offsets): terms joined by + and -; a term is a number
// (decimal or 0x hex) or one of, on the base before any edit:
//   size                   file size
//   ncmds sizeofcmds lcend header values; lcend = end of the load commands
//   cmd(LC_X) cmd(LC_X,n)  offset of the (n-th) load command LC_X (built-in names)
//   cmdi(i)                offset of load command number i
//   blob(W) blobsize(W)    a LINKEDIT blob: rebase bind weak_bind lazy_bind exports
//                          chained trie symbols strings
//   sym(i) import(i)       nlist entry i; chained import entry i
//   sig sigsize            LC_CODE_SIGNATURE dataoff, datasize
//   sigblob(i)             offset of SuperBlob index entry i's blob
//   slice(i)               universal: offset of slice i (the other names then refer
//                          to the image inside a slice, so add slice(i) yourself)
//   pte: segoff(i) segsize(i)  where DataSegment i's offset / size fields are;
//        segtable(i) segstart(i) segment_base_at program_size_at
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/format/codesign.h"
#include "core/format/macho.h"
#include "fuzz/sample_images.h"

#if __has_include("core/io/pte.h")
#include "core/io/pte.h"
#include "core/io/pte_container.h"
#define BAD_HAVE_PTE 1
#else
#define BAD_HAVE_PTE 0
#endif
#if __has_include("tests/pte/pte_writer.h")
#include "tests/pte/pte_writer.h"
#define BAD_HAVE_PTE_WRITER 1
#else
#define BAD_HAVE_PTE_WRITER 0
#endif

namespace fs = std::filesystem;
using namespace machofix;
using namespace machofix::samples;

namespace {

std::string trim(const std::string& text) {
  size_t start = text.find_first_not_of(" \t");
  if (start == std::string::npos) return "";
  size_t end = text.find_last_not_of(" \t\r");
  return text.substr(start, end - start + 1);
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream stream(text);
  while (std::getline(stream, part, separator)) parts.push_back(part);
  if (!text.empty() && text.back() == separator) parts.push_back("");
  return parts;
}

[[noreturn]] void die(const std::string& message) { throw std::runtime_error(message); }

// A valid file and what is known about its structure.
struct Base {
  std::vector<uint8_t> bytes;
  std::string extension = "bin";
  std::optional<test::Image> image;  // the builder's description (of each slice, for universal files)
  std::vector<uint64_t> slices;
  std::string missing;  // why this base is unavailable
};

Base from_image(test::Image image, bool sign) {
  Base base;
  base.bytes = sign ? signed_copy(image.bytes) : image.bytes;
  base.image = std::move(image);
  return base;
}

Base fat_base(bool fat64) {
  test::Image arm64 = dyld_info_dylib().build();
  test::Image x86_64 = dyld_info_dylib(macho::CPU_TYPE_X86_64).build();
  Base base;
  base.bytes = universal({{macho::CPU_TYPE_X86_64, 3, signed_copy(x86_64.bytes)}, {macho::CPU_TYPE_ARM64, 0, signed_copy(arm64.bytes)}},
                         fat64);
  base.image = arm64;  // both slices have the same layout
  Bytes file(base.bytes);
  uint64_t entry = fat64 ? 32 : 20;
  for (uint64_t i = 0; i < 2; ++i) base.slices.push_back(fat64 ? file.be64(8 + i * entry + 8) : file.be32(8 + i * entry + 8));
  return base;
}

Base make_base(const std::string& name) {
  if (name == "dyld_info") return from_image(dyld_info_dylib().build(), false);
  if (name == "dyld_info_signed") return from_image(dyld_info_dylib().build(), true);
  if (name == "dyld_info_noseg") return from_image(dyld_info_dylib().without_segments().build(), false);
  if (name == "chained") return from_image(chained_dylib().build(), false);
  if (name == "chained_signed") return from_image(chained_dylib().build(), true);
  if (name == "many") return from_image(many_dylibs().build(), false);
  if (name == "dup_symtab") return from_image(dyld_info_dylib().symtab().build(), false);
  if (name == "dup_id") return from_image(dyld_info_dylib().id_dylib("/usr/lib/libother.dylib").build(), false);
  if (name == "dup_chained")
    return from_image(chained_dylib().chained_fixups(macho::DYLD_CHAINED_IMPORT, {{1, "_calloc"}}).build(), false);
  if (name == "codesign_signed") {
    test::Image image = dyld_info_dylib().build();
    SignatureSpec spec;
    spec.entitlements = "<plist><dict/></plist>";
    Base base;
    base.bytes = codesign_signed(image.bytes, spec);
    base.image = std::move(image);
    return base;
  }
  if (name == "fat") return fat_base(false);
  if (name == "fat64") return fat_base(true);
  if (name == "pte_hash" || name == "pte_method") {
    // Made here, not read from ../shared/samples: the same layout as the samples
    // ExecuTorch wrote (program, delegate payload, .so, weights), built by the
    // project's own writer, so that no case depends on files beside the checkout.
    Base base;
    base.extension = "pte";
#if BAD_HAVE_PTE_WRITER
    std::vector<uint8_t> so = signed_copy(dyld_info_dylib().build().bytes);
    pte_test::Keys keys = name == "pte_hash" ? pte_test::Keys::Hash : pte_test::Keys::Method;
    base.bytes = pte_test::build(pte_test::aoti_spec(keys, {{"forward", &so, 1}}));
#else
    base.missing = "no tests/pte/pte_writer.h in this build";
#endif
    return base;
  }
  if (name == "ptd") {
    Base base;
    base.extension = "ptd";
#if BAD_HAVE_PTE_WRITER
    pte_test::Spec spec;
    spec.ptd = true;
    spec.segment_alignment = 16;
    spec.data = {{signed_copy(dyld_info_dylib().build().bytes), 0, 1}, {pte_test::pseudo_random(256, 3), 0, 16}};
    spec.named = {{"forward_so_blob", 0}, {"forward_weights_blob", 1}};
    base.bytes = pte_test::build(spec);
#else
    base.missing = "no tests/pte/pte_writer.h in this build";
#endif
    return base;
  }
  die("unknown base '" + name + "'");
}

// ------------------------------------------------------------------ expressions

const std::map<std::string, uint32_t> kCommands = {
    {"LC_SEGMENT_64", macho::LC_SEGMENT_64},       {"LC_SYMTAB", macho::LC_SYMTAB},
    {"LC_LOAD_DYLIB", macho::LC_LOAD_DYLIB},       {"LC_ID_DYLIB", macho::LC_ID_DYLIB},
    {"LC_DYLD_INFO_ONLY", macho::LC_DYLD_INFO_ONLY}, {"LC_DYLD_CHAINED_FIXUPS", macho::LC_DYLD_CHAINED_FIXUPS},
    {"LC_DYLD_EXPORTS_TRIE", macho::LC_DYLD_EXPORTS_TRIE}, {"LC_CODE_SIGNATURE", macho::LC_CODE_SIGNATURE},
    {"LC_UUID", test::LC_UUID},                     {"LC_DYSYMTAB", macho::LC_DYSYMTAB},
};

class Evaluator {
 public:
  explicit Evaluator(const Base& base) : base_(base) {}

  uint64_t eval(const std::string& expression) const {
    uint64_t value = 0;
    int depth = 0;
    size_t start = 0;
    char sign = '+';
    for (size_t i = 0; i <= expression.size(); ++i) {
      char c = i < expression.size() ? expression[i] : '\0';
      if (c == '(') ++depth;
      if (c == ')') --depth;
      if (depth == 0 && (c == '+' || c == '-' || c == '\0') && i > start) {
        uint64_t term = eval_term(trim(expression.substr(start, i - start)));
        value = sign == '+' ? value + term : value - term;
        sign = c;
        start = i + 1;
      }
    }
    return value;
  }

 private:
  uint64_t eval_term(const std::string& term) const {
    if (term.empty()) die("empty term");
    if (std::isdigit(static_cast<unsigned char>(term[0]))) return std::stoull(term, nullptr, 0);
    size_t open = term.find('(');
    std::string name = term.substr(0, open);
    std::vector<std::string> args;
    if (open != std::string::npos) {
      if (term.back() != ')') die("bad term '" + term + "'");
      for (const std::string& arg : split(term.substr(open + 1, term.size() - open - 2), ',')) args.push_back(trim(arg));
    }
    auto number = [&](size_t i) { return i < args.size() ? eval(args[i]) : 0; };
    if (name == "size") return base_.bytes.size();
    if (name == "slice") return base_.slices.at(number(0));
    if (name == "sig" || name == "sigsize" || name == "sigblob") return signature(name, number(0));
    if (name.rfind("seg", 0) == 0 || name == "segment_base_at" || name == "program_size_at") return pte(name, number(0));
    const test::Image& image = require_image(term);
    if (name == "ncmds") return image.ncmds;
    if (name == "sizeofcmds") return image.sizeofcmds;
    if (name == "lcend") return image.load_commands_end();
    if (name == "cmd") {
      auto found = kCommands.find(args.at(0));
      if (found == kCommands.end()) die("unknown load command " + args.at(0));
      return image.command(found->second, number(1)).offset;
    }
    if (name == "cmdi") return image.commands.at(number(0)).offset;
    if (name == "sym") return image.symbol_offsets.at(number(0));
    if (name == "import") return image.chained_import_offsets.at(number(0));
    if (name == "blob" || name == "blobsize") {
      const test::Range& range = blob(image, args.at(0));
      return name == "blob" ? range.offset : range.size;
    }
    die("unknown term '" + term + "'");
  }

  const test::Image& require_image(const std::string& term) const {
    if (!base_.image) die("'" + term + "' needs a Mach-O base");
    return *base_.image;
  }

  static const test::Range& blob(const test::Image& image, const std::string& what) {
    if (what == "rebase") return image.rebase;
    if (what == "bind") return image.bind;
    if (what == "weak_bind") return image.weak_bind;
    if (what == "lazy_bind") return image.lazy_bind;
    if (what == "exports") return image.exports;
    if (what == "chained") return image.chained_fixups;
    if (what == "trie") return image.exports_trie;
    if (what == "symbols") return image.symbols;
    if (what == "strings") return image.strings;
    die("unknown blob '" + what + "'");
  }

  uint64_t signature(const std::string& name, uint64_t index) const {
    Bytes file(base_.bytes);
    uint64_t slice = base_.slices.empty() ? 0 : base_.slices.back();
    uint64_t size = base_.slices.empty() ? file.size() : file.size() - slice;
    MachO image = parse_macho(file.sub(slice, size, "slice"));
    if (!image.code_signature.present) die("the base is not signed");
    if (name == "sig") return image.code_signature.offset;
    if (name == "sigsize") return image.code_signature.size;
    std::optional<CodeSignature> signature = read_code_signature(image);
    return signature->offset + signature->blobs.at(index).offset;
  }

  uint64_t pte(const std::string& name, uint64_t index) const {
#if BAD_HAVE_PTE
    pte_internal::Container container = pte_internal::read_container(Bytes(base_.bytes));
    if (name == "segment_base_at") return container.header.base_at;
    if (name == "program_size_at") return 16;  // eh00 header: magic, length, program_size
    const pte_internal::SegmentEntry& segment = container.segments.at(index);
    if (name == "segoff") return segment.offset_at.value();
    if (name == "segsize") return segment.size_at.value();
    if (name == "segtable") return segment.table_at;
    if (name == "segstart") return container.segment_start(static_cast<uint32_t>(index));
    die("unknown term '" + name + "'");
#else
    (void)index;
    die("'" + name + "' needs core/io/pte.h");
#endif
  }

  const Base& base_;
};

// ------------------------------------------------------------------------- edits

void apply(std::vector<uint8_t>& bytes, const std::string& edit, const Evaluator& at) {
  size_t equals = edit.find('=');
  if (equals == std::string::npos) die("bad edit '" + edit + "'");
  std::string op = edit.substr(0, equals), operand = edit.substr(equals + 1);
  if (op == "cut") {
    uint64_t length = at.eval(operand);
    if (length > bytes.size()) die("cut past the end");
    bytes.resize(length);
    return;
  }
  if (op == "grow") {
    bytes.resize(bytes.size() + at.eval(operand), 0);
    return;
  }
  size_t sign = op.find('@');
  if (sign == std::string::npos) die("bad edit '" + edit + "'");
  std::string kind = op.substr(0, sign);
  uint64_t offset = at.eval(op.substr(sign + 1));
  if (kind == "copy") {
    std::vector<std::string> parts = split(operand, ':');
    if (parts.size() != 2) die("copy needs SRC:LEN");
    uint64_t from = at.eval(parts[0]), length = at.eval(parts[1]);
    if (!fits(from, length, bytes.size()) || !fits(offset, length, bytes.size())) die("copy outside the file");
    std::vector<uint8_t> chunk(bytes.begin() + from, bytes.begin() + from + length);
    for (uint64_t i = 0; i < length; ++i) bytes.at(offset + i) = chunk[i];
    return;
  }
  uint64_t value = at.eval(operand);
  if (kind == "u8") test::write_u8(bytes, offset, static_cast<uint8_t>(value));
  else if (kind == "u16") test::write_u16(bytes, offset, static_cast<uint16_t>(value));
  else if (kind == "u32") test::write_u32(bytes, offset, static_cast<uint32_t>(value));
  else if (kind == "u64") test::write_u64(bytes, offset, value);
  else if (kind == "be32") test::write_u32(bytes, offset, __builtin_bswap32(static_cast<uint32_t>(value)));
  else if (kind == "be64") test::write_u64(bytes, offset, __builtin_bswap64(value));
  else die("unknown edit '" + kind + "'");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: make_bad_inputs CASES OUTDIR\n";
    return 2;
  }
  fs::path out = argv[2];
  fs::create_directories(out);
  std::ifstream table(argv[1]);
  if (!table) {
    std::cerr << "make_bad_inputs: cannot read " << argv[1] << "\n";
    return 2;
  }
  std::ofstream manifest(out / "manifest.tsv", std::ios::trunc);
  std::map<std::string, Base> bases;
  std::string line;
  int line_number = 0, written = 0;
  while (std::getline(table, line)) {
    ++line_number;
    if (trim(line).empty() || trim(line)[0] == '#') continue;
    std::vector<std::string> columns = split(line, '|');
    std::string name = columns.empty() ? "" : trim(columns[0]);
    try {
      if (columns.size() != 6) die("expected 6 columns separated by '|'");
      std::vector<std::string> recipe;
      for (const std::string& word : split(trim(columns[1]), ' '))
        if (!trim(word).empty()) recipe.push_back(trim(word));
      if (recipe.empty()) die("empty recipe");
      if (!bases.count(recipe[0])) bases.emplace(recipe[0], make_base(recipe[0]));
      const Base& base = bases.at(recipe[0]);
      std::string file = name + "." + base.extension;
      if (!base.missing.empty()) {
        manifest << name << "\t" << file << "\tnone\tmissing:" << base.missing << "\n";
        continue;
      }
      Evaluator evaluate(base);
      std::vector<uint8_t> bytes = base.bytes;
      for (size_t i = 1; i < recipe.size(); ++i) apply(bytes, recipe[i], evaluate);
      std::string offset_text = trim(columns[5]);
      std::ostringstream offset;
      if (offset_text == "none") offset << "none";
      else offset << machofix::hex(evaluate.eval(offset_text));
      std::ofstream output(out / file, std::ios::binary | std::ios::trunc);
      output.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
      if (!output.flush()) die("cannot write " + (out / file).string());
      manifest << name << "\t" << file << "\t" << offset.str() << "\t" << "-" << "\n";
      ++written;
    } catch (const Error& error) {
      std::cerr << "make_bad_inputs: " << argv[1] << ":" << line_number << " (" << name << "): " << error.describe() << "\n";
      return 1;
    } catch (const std::exception& error) {
      std::cerr << "make_bad_inputs: " << argv[1] << ":" << line_number << " (" << name << "): " << error.what() << "\n";
      return 1;
    }
  }
  std::cout << "make_bad_inputs: " << written << " files in " << out.string() << "\n";
  return 0;
}
