#include "core/lief/lief_skeleton.h"

#include <cstddef>
#include <cstring>
#include <optional>

#include "core/base/util.h"
#include "core/format/macho_format.h"
#include "core/format/macho_structs.h"

namespace machofix {

using namespace macho;

namespace {

// Commands that hold no file offset (or only offsets into __TEXT that no reader
// follows: LC_MAIN's entryoff, LC_ENCRYPTION_INFO_64's cryptoff): copied as they are.
bool holds_no_file_data(uint32_t cmd) {
  switch (cmd) {
    case LC_LOAD_DYLIB: case LC_ID_DYLIB: case LC_LOAD_WEAK_DYLIB: case LC_REEXPORT_DYLIB:
    case LC_LAZY_LOAD_DYLIB: case LC_LOAD_UPWARD_DYLIB: case LC_RPATH: case LC_THREAD: case LC_UNIXTHREAD:
    case LC_IDENT: case LC_LOAD_DYLINKER: case LC_ID_DYLINKER: case LC_PREBOUND_DYLIB: case LC_SUB_FRAMEWORK:
    case LC_SUB_UMBRELLA: case LC_SUB_CLIENT: case LC_SUB_LIBRARY: case LC_PREBIND_CKSUM: case LC_ROUTINES_64:
    case LC_UUID: case LC_VERSION_MIN_MACOSX: case LC_VERSION_MIN_IPHONEOS: case LC_VERSION_MIN_TVOS:
    case LC_VERSION_MIN_WATCHOS: case LC_BUILD_VERSION: case LC_DYLD_ENVIRONMENT: case LC_MAIN:
    case LC_SOURCE_VERSION: case LC_ENCRYPTION_INFO_64: case LC_LINKER_OPTION: case LC_TARGET_TRIPLE:
      return true;
  }
  return false;
}

// linkedit_data_command: one (dataoff, datasize) into __LINKEDIT.
bool is_linkedit_data(uint32_t cmd) {
  switch (cmd) {
    case LC_SEGMENT_SPLIT_INFO: case LC_FUNCTION_STARTS: case LC_DATA_IN_CODE:
    case LC_DYLIB_CODE_SIGN_DRS: case LC_LINKER_OPTIMIZATION_HINT: case LC_DYLD_EXPORTS_TRIE:
    case LC_DYLD_CHAINED_FIXUPS: case LC_ATOM_INFO:
      return true;
  }
  return false;
}

// The reason a layout cannot be compacted; caught in lief_image(), which then hands
// LIEF the whole slice.
struct Uncompactable {
  std::string why;
};

class SkeletonBuilder {
 public:
  explicit SkeletonBuilder(const Bytes& slice) : slice_(slice) {}

  LiefImage build() {
    MachHeader64 header = slice_.get<MachHeader64>(0, "Mach-O header");
    if (header.magic != MH_MAGIC_64) throw Uncompactable{"not a 64-bit little-endian Mach-O"};
    commands_end_ = sizeof(MachHeader64) + uint64_t(header.sizeofcmds);
    slice_.require(0, commands_end_, "load commands");
    ncmds_ = header.ncmds;
    find_linkedit();
    // 16: every alignment LINKEDIT's contents need (nlist 8, the signature 16) holds
    // after the shift as before, when __LINKEDIT itself was so aligned.
    uint64_t new_linkedit = align_up(commands_end_, 16);
    shift_down_ = linkedit_offset_ - new_linkedit;
    image_.head.assign(slice_.data(), slice_.data() + commands_end_);
    image_.head.resize(new_linkedit, 0);
    image_.tail = slice_.sub(linkedit_offset_, kept_end_ - linkedit_offset_, "__LINKEDIT");
    for_each_command([this](uint32_t cmd, uint64_t at, uint32_t size) { patch(cmd, at, size); });
    return std::move(image_);
  }

 private:
  template <typename Visit>
  void for_each_command(Visit visit) {
    uint64_t at = sizeof(MachHeader64);
    for (uint32_t index = 0; index < ncmds_; ++index) {
      auto command = slice_.get<macho::LoadCommand>(at, "load command");
      if (command.cmdsize < sizeof(macho::LoadCommand) || command.cmdsize > commands_end_ - at)
        throw Uncompactable{"load command " + std::to_string(index) + " has cmdsize " + std::to_string(command.cmdsize)};
      visit(command.cmd, at, command.cmdsize);
      at += command.cmdsize;
    }
  }

  void find_linkedit() {
    bool found = false;
    std::optional<uint64_t> signature_offset;
    for_each_command([&](uint32_t cmd, uint64_t at, uint32_t size) {
      if (cmd == LC_CODE_SIGNATURE && size >= sizeof(LinkeditDataCommand))
        signature_offset = slice_.get<LinkeditDataCommand>(at, "LC_CODE_SIGNATURE").dataoff;
      if (cmd != LC_SEGMENT_64) return;
      Bytes body = slice_.sub(at, size, "LC_SEGMENT_64");
      if (body.fixed_string(offsetof(SegmentCommand64, segname), 16, "segment name") != "__LINKEDIT") return;
      if (found) throw Uncompactable{"two __LINKEDIT segments"};
      found = true;
      SegmentCommand64 segment = body.get<SegmentCommand64>(0, "LC_SEGMENT_64");
      if (segment.nsects != 0) throw Uncompactable{"__LINKEDIT has sections"};
      linkedit_offset_ = segment.fileoff;
      linkedit_end_ = checked_add(segment.fileoff, segment.filesize, at, "__LINKEDIT's end");
    });
    if (!found) throw Uncompactable{"no __LINKEDIT segment"};
    if (linkedit_offset_ < commands_end_ || linkedit_end_ > slice_.size())
      throw Uncompactable{"__LINKEDIT (file offsets " + hex(linkedit_offset_) + "-" + hex(linkedit_end_) +
                          ") does not lie between the load commands and the end of the slice"};
    // The signature is last in __LINKEDIT (dyld wants it so): the image ends before it,
    // and a range that reaches into it (checked in shift()) makes the layout uncompactable.
    kept_end_ = linkedit_end_;
    if (signature_offset && *signature_offset >= linkedit_offset_ && *signature_offset <= linkedit_end_)
      kept_end_ = *signature_offset;
  }

  void patch(uint32_t cmd, uint64_t at, uint32_t size) {
    if (holds_no_file_data(cmd)) return;
    if (cmd == LC_SEGMENT_64) return patch_segment(at, size);
    if (cmd == LC_CODE_SIGNATURE) return patch_struct<LinkeditDataCommand>(at, size, [&](LinkeditDataCommand& c) {
      c.dataoff = 0, c.datasize = 0;  // left out (lief_skeleton.h says why)
    });
    if (is_linkedit_data(cmd)) return patch_struct<LinkeditDataCommand>(at, size, [&](LinkeditDataCommand& c) {
      shift(c.dataoff, c.datasize, "linkedit data", at);
    });
    if (cmd == LC_SYMTAB) return patch_struct<SymtabCommand>(at, size, [&](SymtabCommand& c) {
      shift(c.symoff, uint64_t(c.nsyms) * sizeof(Nlist64), "symbol table", at);
      shift(c.stroff, c.strsize, "string table", at);
    });
    if (cmd == LC_DYSYMTAB) return patch_struct<DysymtabCommand>(at, size, [&](DysymtabCommand& c) {
      shift(c.tocoff, uint64_t(c.ntoc) * 8, "table of contents", at);                // dylib_table_of_contents
      shift(c.modtaboff, uint64_t(c.nmodtab) * 56, "module table", at);             // dylib_module_64
      shift(c.extrefsymoff, uint64_t(c.nextrefsyms) * 4, "external references", at);  // dylib_reference
      shift(c.indirectsymoff, uint64_t(c.nindirectsyms) * 4, "indirect symbols", at);
      shift(c.extreloff, uint64_t(c.nextrel) * sizeof(RelocationInfo), "external relocations", at);
      shift(c.locreloff, uint64_t(c.nlocrel) * sizeof(RelocationInfo), "local relocations", at);
    });
    if (cmd == LC_DYLD_INFO || cmd == LC_DYLD_INFO_ONLY) return patch_struct<DyldInfoCommand>(at, size, [&](DyldInfoCommand& c) {
      c.rebase_off = 0, c.rebase_size = 0;  // left out (lief_skeleton.h says why)
      c.export_off = 0, c.export_size = 0;
      shift(c.bind_off, c.bind_size, "bind info", at);
      shift(c.weak_bind_off, c.weak_bind_size, "weak bind info", at);
      shift(c.lazy_bind_off, c.lazy_bind_size, "lazy bind info", at);
    });
    throw Uncompactable{"load command " + hex(cmd) + " at " + hex(at) + " is not one the skeleton knows"};
  }

  // Reads the structure T of the command at `at` from the slice, lets `edit` change
  // it, and writes it into the head at the same place.
  template <typename T, typename Edit>
  void patch_struct(uint64_t at, uint32_t size, Edit edit) {
    if (size < sizeof(T)) throw Uncompactable{"load command at " + hex(at) + " is shorter than its structure"};
    T command = slice_.get<T>(at, "load command");
    edit(command);
    put(image_.head, at, command);
  }

  void patch_segment(uint64_t at, uint32_t size) {
    patch_struct<SegmentCommand64>(at, size, [&](SegmentCommand64& segment) {
      if (segment.nsects > (size - sizeof(SegmentCommand64)) / sizeof(Section64))
        throw Uncompactable{"the sections of the segment at " + hex(at) + " do not fit in its command"};
      bool linkedit = std::string(segment.segname, strnlen(segment.segname, 16)) == "__LINKEDIT";
      segment.fileoff = linkedit ? linkedit_offset_ - shift_down_ : 0;
      segment.filesize = 0;
      for (uint32_t i = 0; i < segment.nsects; ++i) {
        uint64_t section_at = at + sizeof(SegmentCommand64) + uint64_t(i) * sizeof(Section64);
        Section64 section = slice_.get<Section64>(section_at, "section");
        if (section.nreloc != 0) throw Uncompactable{"a section at " + hex(section_at) + " has relocation entries"};
        section.offset = 0;
        put(image_.head, section_at, section);
      }
    });
  }

  // An (offset, size) into __LINKEDIT, moved with it. (0, 0) means "none" and stays.
  void shift(ul32& offset, uint64_t size, const char* what, uint64_t command_at) {
    if (offset == 0 && size == 0) return;
    if (offset < linkedit_offset_ || offset > kept_end_ || size > kept_end_ - offset)
      throw Uncompactable{std::string(what) + " of the load command at " + hex(command_at) + " (offset " +
                          hex(offset) + ", size " + hex(size) + ") lies outside __LINKEDIT before the signature"};
    offset = static_cast<uint32_t>(offset - shift_down_);
  }

  const Bytes& slice_;
  LiefImage image_;
  uint64_t commands_end_ = 0;
  uint32_t ncmds_ = 0;
  uint64_t linkedit_offset_ = 0;
  uint64_t linkedit_end_ = 0;
  uint64_t kept_end_ = 0;  // the end of what the image keeps of __LINKEDIT: the signature's start
  uint64_t shift_down_ = 0;
};

}  // namespace

std::vector<Bytes> LiefImage::pieces() const {
  std::vector<Bytes> pieces;
  if (!head.empty()) pieces.emplace_back(head);
  pieces.push_back(tail);
  return pieces;
}

std::vector<uint8_t> LiefImage::joined() const {
  std::vector<uint8_t> out(head);
  out.insert(out.end(), tail.data(), tail.data() + tail.size());
  return out;
}

LiefImage lief_image(const Bytes& slice) {
  LiefImage whole;
  whole.tail = slice;
  try {
    return SkeletonBuilder(slice).build();
  } catch (const Uncompactable& reason) {
    whole.whole_slice_because = reason.why;
  } catch (const Error& error) {
    whole.whole_slice_because = error.problem();
  }
  return whole;
}

}  // namespace machofix
