// Loader rules on the LINKEDIT content (dyld3 MachOAnalyzer::validLinkeditLayout,
// mach_o::Image::validStructureLinkedit): every blob inside __LINKEDIT, none
// overlapping another, each aligned; symbol table limits; one fixup encoding.
#include <algorithm>

#include "core/error.h"
#include "core/loader_rules_internal.h"
#include "core/macho_format.h"

namespace machofix::rules {

using namespace macho;

namespace {

constexpr uint64_t kPointer = 8;
constexpr uint32_t kMaxSymbols = 0x10000000;

// dysymtab_command field offsets.
constexpr uint64_t kIlocalsym = 8, kIndirectsymoff = 56, kNindirectsyms = 60, kExtreloff = 64, kNextrel = 68,
                   kLocreloff = 72, kNlocrel = 76;

void add_blob(std::vector<Blob>& blobs, const char* name, uint64_t alignment, uint64_t offset, uint64_t size, uint64_t field,
              bool code_signature = false) {
  if (size) blobs.push_back({name, alignment, offset, size, field, code_signature});
}

void add_dyld_info(std::vector<Blob>& blobs, const Command& command, const Bytes& body) {
  static const char* const names[] = {"rebase opcodes", "bind opcodes", "weak bind opcodes", "lazy bind opcodes", "exports trie"};
  for (uint64_t i = 0; i < 5; ++i)
    add_blob(blobs, names[i], kPointer, body.u32(8 + 8 * i), body.u32(12 + 8 * i), command.offset + 8 + 8 * i);
}

const char* linkedit_data_name(uint32_t cmd) {
  switch (cmd) {
    case LC_DYLD_EXPORTS_TRIE: return "exports trie";
    case LC_DYLD_CHAINED_FIXUPS: return "chained fixups";
    case LC_SEGMENT_SPLIT_INFO: return "shared cache info";
    case LC_FUNCTION_STARTS: return "function starts";
    case LC_DATA_IN_CODE: return "data in code";
    case LC_CODE_SIGNATURE: return "code signature";
  }
  return nullptr;
}

void add_dysymtab(std::vector<Blob>& blobs, const Command& command, const Bytes& body) {
  add_blob(blobs, "local relocations", kPointer, body.u32(kLocreloff), uint64_t(body.u32(kNlocrel)) * 8, command.offset + kLocreloff);
  add_blob(blobs, "external relocations", kPointer, body.u32(kExtreloff), uint64_t(body.u32(kNextrel)) * 8, command.offset + kExtreloff);
  add_blob(blobs, "indirect symbol table", 4, body.u32(kIndirectsymoff), uint64_t(body.u32(kNindirectsyms)) * 4,
           command.offset + kIndirectsymoff);
}

std::vector<Blob> collect_blobs(const Check& check) {
  std::vector<Blob> blobs;
  for (const Command& command : check.commands) {
    Bytes body = check.body(command);
    if ((command.cmd == LC_DYLD_INFO || command.cmd == LC_DYLD_INFO_ONLY) && body.size() >= 48) add_dyld_info(blobs, command, body);
    if (const char* name = linkedit_data_name(command.cmd); name && body.size() >= 16)
      add_blob(blobs, name, kPointer, body.u32(8), body.u32(12), command.offset + 8, command.cmd == LC_CODE_SIGNATURE);
    if (command.cmd == LC_DYSYMTAB && body.size() >= 80) add_dysymtab(blobs, command, body);
    if (command.cmd == LC_SYMTAB && body.size() >= 24) {
      add_blob(blobs, "symbol table", kPointer, body.u32(8), uint64_t(body.u32(12)) * kNlist64Size, command.offset + 8);
      add_blob(blobs, "symbol table strings", 1, body.u32(16), body.u32(20), command.offset + 16);
    }
  }
  return blobs;
}

void check_placement(Check& check, std::vector<Blob> blobs) {
  const Segment* linkedit = check.segment("__LINKEDIT");
  if (!linkedit) return;  // seg-linkedit says so
  std::stable_sort(blobs.begin(), blobs.end(), [](const Blob& a, const Blob& b) { return a.offset < b.offset; });
  uint64_t end_of_linkedit = linkedit->fileoff + linkedit->filesize;
  uint64_t previous_end = linkedit->fileoff;
  const char* previous = nullptr;
  for (const Blob& blob : blobs) {
    if (blob.offset < previous_end && !previous)
      check.add("linkedit-in-segment", blob.field, std::string("LINKEDIT content '") + blob.name + "' at " + hex(blob.offset) +
                                                        " starts before __LINKEDIT (" + hex(linkedit->fileoff) + ")");
    else if (blob.offset < previous_end)
      check.add("linkedit-overlap", blob.field, std::string("LINKEDIT overlap of ") + previous + " and " + blob.name);
    if (blob.offset > end_of_linkedit || blob.size > end_of_linkedit - blob.offset)
      check.add("linkedit-in-segment", blob.field, std::string("LINKEDIT content '") + blob.name +
                                                        "' extends beyond end of segment (" + hex(end_of_linkedit) + ")");
    Gate gate = blob.code_signature ? Gate::CodeSigAlignment : Gate::LinkeditAlignment;
    if (blob.offset % blob.alignment && check.enforced(gate))
      check.add("linkedit-align", blob.field, std::string("mis-aligned LINKEDIT content '") + blob.name + "' at " +
                                                  hex(blob.offset) + " (must be " + std::to_string(blob.alignment) + "-aligned)");
    previous_end = std::max(previous_end, blob.offset + blob.size);
    previous = blob.name;
  }
}

void check_fixup_encodings(Check& check) {
  const Command* dysymtab = check.first(LC_DYSYMTAB);
  uint32_t local = 0, external = 0;
  if (dysymtab && dysymtab->size >= 80) {
    local = check.body(*dysymtab).u32(kNlocrel);
    external = check.body(*dysymtab).u32(kNextrel);
  }
  if (check.first(LC_DYLD_INFO_ONLY)) {
    if (external) check.add("fixups-one-encoding", dysymtab->offset + kNextrel, "malformed mach-o contains LC_DYLD_INFO_ONLY and external relocations");
    if (local && check.enforced(Gate::DyldInfoAndLocalRelocs))
      check.add("fixups-one-encoding", dysymtab->offset + kNlocrel, "malformed mach-o contains LC_DYLD_INFO_ONLY and local relocations");
  }
  if (const Command* chained = check.first(LC_DYLD_CHAINED_FIXUPS)) {
    if (external || local)
      check.add("fixups-one-encoding", dysymtab->offset + (external ? kNextrel : kNlocrel),
                std::string("malformed mach-o contains LC_DYLD_CHAINED_FIXUPS and ") + (external ? "external" : "local") + " relocations");
    if (check.first(LC_DYLD_INFO_ONLY))
      check.add("fixups-one-encoding", chained->offset, "malformed mach-o contains LC_DYLD_INFO and LC_DYLD_CHAINED_FIXUPS");
  }
}

// dyld3 checks each LC_DYSYMTAB range on its own against nsyms, and for wrapping.
void check_dysymtab_ranges(Check& check, uint32_t nsyms, const Command& dysymtab) {
  static const char* const kinds[] = {"local", "extern", "undefined"};
  Bytes body = check.body(dysymtab);
  for (uint64_t i = 0; i < 3; ++i) {
    uint64_t field = kIlocalsym + 8 * i;
    uint32_t index = body.u32(field), count = body.u32(field + 4);
    if (count > nsyms || index > nsyms)
      check.add("dysymtab-ranges", dysymtab.offset + field, std::string("malformed mach-o image: indirect symbol table ") + kinds[i] +
                                                                " symbol count exceeds total symbols (" + std::to_string(nsyms) + ")");
    else if (uint32_t(index + count) < index)
      check.add("dysymtab-ranges", dysymtab.offset + field, std::string("malformed mach-o image: indirect symbol table ") + kinds[i] +
                                                                " symbol count wraps");
  }
}

void check_symbol_tables(Check& check) {
  const Command* symtab = check.first(LC_SYMTAB);
  const Command* dysymtab = check.first(LC_DYSYMTAB);
  if (dysymtab && dysymtab->size >= 80 && check.body(*dysymtab).u32(kNindirectsyms) > kMaxSymbols)
    check.add("symtab-limits", dysymtab->offset + kNindirectsyms, "malformed mach-o image: indirect symbol table too large");
  if (!symtab || symtab->size < 24) return;
  uint32_t nsyms = check.body(*symtab).u32(12);
  if (nsyms > kMaxSymbols) check.add("symtab-limits", symtab->offset + 12, "malformed mach-o image: symbol table too large");
  if (dysymtab && dysymtab->size >= 80) check_dysymtab_ranges(check, nsyms, *dysymtab);
}

}  // namespace

void check_linkedit(Check& check) {
  std::vector<Blob> blobs = collect_blobs(check);
  if (!check.first(LC_DYLD_INFO) && !check.first(LC_DYLD_INFO_ONLY) && !check.first(LC_DYSYMTAB))
    check.add("linkedit-info-present", 16, "malformed mach-o missing LC_DYLD_INFO and LC_DYSYMTAB");
  else if (blobs.empty())
    check.add("linkedit-info-present", 16, "malformed mach-o missing LINKEDIT (no LINKEDIT content at all)");
  check_placement(check, std::move(blobs));
  check_fixup_encodings(check);
  check_symbol_tables(check);
}

}  // namespace machofix::rules
