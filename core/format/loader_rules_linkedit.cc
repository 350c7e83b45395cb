// Loader rules on the LINKEDIT content (dyld3 MachOAnalyzer::validLinkeditLayout,
// mach_o::Image::validStructureLinkedit): every blob inside __LINKEDIT, none
// overlapping another, each aligned; symbol table limits; one fixup encoding.
#include <algorithm>

#include "core/base/error.h"
#include "core/format/loader_rules_internal.h"
#include "core/format/macho_format.h"
#include "core/format/macho_structs.h"

namespace machofix::rules {

using namespace macho;

namespace {

constexpr uint64_t kPointer = 8;
constexpr uint32_t kMaxSymbols = 0x10000000;

constexpr uint64_t kIndirectSymbolSize = sizeof(uint32_t);  // an indirect symbol table entry: a symbol index

void add_blob(std::vector<Blob>& blobs, const char* name, uint64_t alignment, uint64_t offset, uint64_t size, uint64_t field,
              bool code_signature = false) {
  if (size) blobs.push_back({name, alignment, offset, size, field, code_signature});
}

void add_dyld_info(std::vector<Blob>& blobs, const Command& command, const Bytes& body) {
  static const char* const names[] = {"rebase opcodes", "bind opcodes", "weak bind opcodes", "lazy bind opcodes", "exports trie"};
  // Each an (offset, size) pair of u32.
  static const uint64_t fields[] = {offsetof(DyldInfoCommand, rebase_off), offsetof(DyldInfoCommand, bind_off),
                                    offsetof(DyldInfoCommand, weak_bind_off), offsetof(DyldInfoCommand, lazy_bind_off),
                                    offsetof(DyldInfoCommand, export_off)};
  for (uint64_t i = 0; i < 5; ++i)
    add_blob(blobs, names[i], kPointer, body.u32(fields[i]), body.u32(fields[i] + sizeof(uint32_t)), command.offset + fields[i]);
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
  DysymtabCommand dysymtab = body.get<DysymtabCommand>(0, "LC_DYSYMTAB");  // the caller checked its size
  add_blob(blobs, "local relocations", kPointer, dysymtab.locreloff, uint64_t(dysymtab.nlocrel) * sizeof(RelocationInfo),
           command.offset + offsetof(DysymtabCommand, locreloff));
  add_blob(blobs, "external relocations", kPointer, dysymtab.extreloff, uint64_t(dysymtab.nextrel) * sizeof(RelocationInfo),
           command.offset + offsetof(DysymtabCommand, extreloff));
  add_blob(blobs, "indirect symbol table", kIndirectSymbolSize, dysymtab.indirectsymoff,
           uint64_t(dysymtab.nindirectsyms) * kIndirectSymbolSize, command.offset + offsetof(DysymtabCommand, indirectsymoff));
}

std::vector<Blob> collect_blobs(const Check& check) {
  std::vector<Blob> blobs;
  for (const Command& command : check.commands) {
    Bytes body = check.body(command);
    if ((command.cmd == LC_DYLD_INFO || command.cmd == LC_DYLD_INFO_ONLY) && body.size() >= sizeof(DyldInfoCommand))
      add_dyld_info(blobs, command, body);
    if (const char* name = linkedit_data_name(command.cmd); name && body.size() >= sizeof(LinkeditDataCommand)) {
      LinkeditDataCommand data = body.get<LinkeditDataCommand>(0, "linkedit data command");
      add_blob(blobs, name, kPointer, data.dataoff, data.datasize, command.offset + offsetof(LinkeditDataCommand, dataoff),
               command.cmd == LC_CODE_SIGNATURE);
    }
    if (command.cmd == LC_DYSYMTAB && body.size() >= sizeof(DysymtabCommand)) add_dysymtab(blobs, command, body);
    if (command.cmd == LC_SYMTAB && body.size() >= sizeof(SymtabCommand)) {
      SymtabCommand symtab = body.get<SymtabCommand>(0, "LC_SYMTAB");
      add_blob(blobs, "symbol table", kPointer, symtab.symoff, uint64_t(symtab.nsyms) * sizeof(Nlist64),
               command.offset + offsetof(SymtabCommand, symoff));
      add_blob(blobs, "symbol table strings", 1, symtab.stroff, symtab.strsize, command.offset + offsetof(SymtabCommand, stroff));
    }
  }
  return blobs;
}

void check_placement(Check& check, std::vector<Blob> blobs) {
  const Segment* linkedit = check.segment("__LINKEDIT");
  if (!linkedit) return;  // seg-linkedit says so
  std::stable_sort(blobs.begin(), blobs.end(), [](const Blob& a, const Blob& b) { return a.offset < b.offset; });
  uint64_t end_of_linkedit = linkedit->file_offset + linkedit->file_size;
  uint64_t previous_end = linkedit->file_offset;
  const char* previous = nullptr;
  for (const Blob& blob : blobs) {
    if (blob.offset < previous_end && !previous)
      check.add("linkedit-in-segment", blob.field, std::string("LINKEDIT content '") + blob.name + "' at " + hex(blob.offset) +
                                                        " starts before __LINKEDIT (" + hex(linkedit->file_offset) + ")");
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
  if (dysymtab && dysymtab->size >= sizeof(DysymtabCommand)) {
    DysymtabCommand fields = check.body(*dysymtab).get<DysymtabCommand>(0, "LC_DYSYMTAB");
    local = fields.nlocrel;
    external = fields.nextrel;
  }
  if (check.first(LC_DYLD_INFO_ONLY)) {
    if (external) check.add("fixups-one-encoding", dysymtab->offset + offsetof(DysymtabCommand, nextrel), "malformed mach-o contains LC_DYLD_INFO_ONLY and external relocations");
    if (local && check.enforced(Gate::DyldInfoAndLocalRelocs))
      check.add("fixups-one-encoding", dysymtab->offset + offsetof(DysymtabCommand, nlocrel), "malformed mach-o contains LC_DYLD_INFO_ONLY and local relocations");
  }
  if (const Command* chained = check.first(LC_DYLD_CHAINED_FIXUPS)) {
    if (external || local)
      check.add("fixups-one-encoding", dysymtab->offset + (external ? offsetof(DysymtabCommand, nextrel) : offsetof(DysymtabCommand, nlocrel)),
                std::string("malformed mach-o contains LC_DYLD_CHAINED_FIXUPS and ") + (external ? "external" : "local") + " relocations");
    if (check.first(LC_DYLD_INFO_ONLY))
      check.add("fixups-one-encoding", chained->offset, "malformed mach-o contains LC_DYLD_INFO and LC_DYLD_CHAINED_FIXUPS");
  }
}

// dyld3 checks each LC_DYSYMTAB range on its own against nsyms, and for wrapping.
void check_dysymtab_ranges(Check& check, uint32_t nsyms, const Command& dysymtab) {
  static const char* const kinds[] = {"local", "extern", "undefined"};
  // Each an (index, count) pair of u32.
  static const uint64_t fields[] = {offsetof(DysymtabCommand, ilocalsym), offsetof(DysymtabCommand, iextdefsym),
                                    offsetof(DysymtabCommand, iundefsym)};
  Bytes body = check.body(dysymtab);
  for (uint64_t i = 0; i < 3; ++i) {
    uint64_t field = fields[i];
    uint32_t index = body.u32(field), count = body.u32(field + sizeof(uint32_t));
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
  bool whole_dysymtab = dysymtab && dysymtab->size >= sizeof(DysymtabCommand);
  if (whole_dysymtab && check.body(*dysymtab).get<DysymtabCommand>(0, "LC_DYSYMTAB").nindirectsyms > kMaxSymbols)
    check.add("symtab-limits", dysymtab->offset + offsetof(DysymtabCommand, nindirectsyms),
              "malformed mach-o image: indirect symbol table too large");
  if (!symtab || symtab->size < sizeof(SymtabCommand)) return;
  uint32_t nsyms = check.body(*symtab).get<SymtabCommand>(0, "LC_SYMTAB").nsyms;
  if (nsyms > kMaxSymbols)
    check.add("symtab-limits", symtab->offset + offsetof(SymtabCommand, nsyms), "malformed mach-o image: symbol table too large");
  if (whole_dysymtab) check_dysymtab_ranges(check, nsyms, *dysymtab);
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
