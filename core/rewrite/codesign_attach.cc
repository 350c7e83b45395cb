// Making room in a Mach-O slice for a new signature, as a linker would have: an
// LC_CODE_SIGNATURE command in the header padding, __LINKEDIT grown to hold the
// signature at its end (add_adhoc_signature), or an unreadable signature and its
// command removed first (replace_unreadable_signature). The signature itself is
// written by codesign_write.cc.
#include <algorithm>

#include "core/format/codesign_internal.h"
#include "core/rewrite/load_commands.h"
#include "core/format/macho_format.h"
#include "core/format/macho_structs.h"

namespace machofix {

using namespace cs;

namespace {

constexpr uint64_t kLoadCommandSize = sizeof(macho::LinkeditDataCommand);  // LC_CODE_SIGNATURE

// The end of the room after the load commands: the first section data, or the
// first segment content after the header.
uint64_t header_room_end(const MachO& image) {
  uint64_t end = image.first_section_offset();
  for (const Segment& segment : image.segments)
    if (segment.file_offset > 0 && segment.file_size > 0) end = std::min(end, segment.file_offset);
  return end;
}

void require_header_room(const MachO& image) {
  uint64_t start = image.load_commands_end();
  uint64_t end = header_room_end(image);
  if (end < start || end - start < kLoadCommandSize)
    fail("cannot add a signature: no room in the header for LC_CODE_SIGNATURE (" +
         std::to_string(end < start ? 0 : end - start) +
         " bytes free after the load commands, 16 needed); relink with -headerpad_max_install_names");
  // A linker leaves this padding zero; bytes there may be data some tool put there,
  // which the new command would overwrite.
  if (!all_zero(image.bytes.sub(start, kLoadCommandSize, "header padding")))
    image.bytes.fail_here(start,
                          "cannot add a signature: no room in the header for LC_CODE_SIGNATURE: the 16 bytes "
                          "after the load commands are not zero, and machofix does not overwrite them; relink");
}

// __LINKEDIT must end the slice, but for zero bytes after it: the padding a container
// (a .pte segment, a fat slice) adds to align what follows. Those bytes join __LINKEDIT
// as padding before the signature, as a linker pads its string table. Data after
// __LINKEDIT that is not zero (an appended payload) is refused: signing would hash it
// into __LINKEDIT, and the tool that appended it no longer finds it where it left it.
const Segment& linkedit_at_end(const MachO& image) {
  const Segment* linkedit = image.segment("__LINKEDIT");
  if (!linkedit) fail("cannot add a signature: there is no __LINKEDIT segment");
  uint64_t linkedit_end = linkedit->file_offset + linkedit->file_size;
  if (linkedit_end > image.bytes.size() ||
      !all_zero(image.bytes.sub(linkedit_end, image.bytes.size() - linkedit_end, "bytes after __LINKEDIT")))
    fail("cannot add a signature: __LINKEDIT (ends at " + hex(linkedit_end) + ") is not at the end of the slice (" +
         hex(image.bytes.size()) + " bytes), and the bytes after it are not zero padding");
  for (const Segment& segment : image.segments)
    if (&segment != linkedit && segment.file_size > 0 && segment.file_offset > linkedit->file_offset)
      fail("cannot add a signature: segment " + segment.name + " lies after __LINKEDIT in the file");
  return *linkedit;
}

// lld leaves __LINKEDIT's vmsize equal to its filesize; ld64 and llvm-objcopy round
// it up to the target's page. Keep whichever convention the file follows.
uint64_t new_linkedit_vmsize(const MachO& image, const Segment& linkedit, uint64_t file_size) {
  if (linkedit.vmsize >= file_size) return linkedit.vmsize;
  if (linkedit.vmsize == linkedit.file_size) return file_size;
  uint64_t page = image.cputype == macho::CPU_TYPE_ARM64 ? 0x4000 : 0x1000;
  return align_up(file_size, page);
}

void require_vm_room(const MachO& image, const Segment& linkedit, uint64_t vmsize) {
  for (const Segment& segment : image.segments)
    if (&segment != &linkedit && segment.vmsize > 0 && segment.vmaddr >= linkedit.vmaddr &&
        segment.vmaddr < linkedit.vmaddr + vmsize)
      fail("cannot add a signature: growing __LINKEDIT would overlap segment " + segment.name);
}

void grow_linkedit(MutableBytes out, const MachO& image, const Segment& linkedit, uint64_t new_end) {
  uint64_t file_size = new_end - linkedit.file_offset;
  uint64_t vmsize = new_linkedit_vmsize(image, linkedit, file_size);
  require_vm_room(image, linkedit, vmsize);
  uint64_t command = image.commands[linkedit.command_index].offset;
  put(out, command + offsetof(macho::SegmentCommand64, vmsize), ul64(vmsize));
  put(out, command + offsetof(macho::SegmentCommand64, filesize), ul64(file_size));
}

void append_signature_command(MutableBytes out, const MachO& image, const LinkerSignatureLayout& layout) {
  macho::LinkeditDataCommand command;
  command.cmd = macho::LC_CODE_SIGNATURE;
  command.cmdsize = sizeof command;
  command.dataoff = static_cast<uint32_t>(layout.offset);
  command.datasize = static_cast<uint32_t>(layout.size);
  std::vector<uint8_t> bytes(sizeof command);
  put(bytes, 0, command);
  LoadCommandList commands(image);  // appended last, as ld64 and lld place it
  commands.insert(commands.size(), std::move(bytes));
  commands.write(image, out);
}

}  // namespace

uint64_t adhoc_signature_room(uint64_t slice_size, const std::string& identifier) {
  LinkerSignatureLayout layout = linker_layout(slice_size, identifier);  // the __LINKEDIT data ends by the slice's end
  return layout.offset + layout.size - slice_size;
}

HashedPages add_adhoc_signature(OutputImage& slice, uint64_t file_offset, const std::string& identifier) {
  MachO image = parse_macho(slice.bytes(file_offset));  // a view of `slice`, which never moves
  if (image.code_signature.present) fail("the slice is already signed");
  if (identifier.empty() || identifier.find('\0') != std::string::npos)
    fail("the signature identifier must be a non-empty string without NUL bytes");
  const Segment& linkedit = linkedit_at_end(image);
  require_header_room(image);
  LinkerSignatureLayout layout = linker_layout(image.bytes.size(), identifier);  // after any zero padding
  if (layout.offset + layout.size > UINT32_MAX) fail("cannot add a signature: the slice would exceed 4 GiB");

  // Every value of `image` used below was parsed before the slice changes.
  slice.resize(layout.offset + layout.size);
  append_signature_command(slice, image, layout);
  grow_linkedit(slice, image, linkedit, layout.offset + layout.size);
  return write_linker_signature(slice, layout, image, identifier);
}

std::vector<uint8_t> add_adhoc_signature(const MachO& image, const std::string& identifier) {
  OutputImage slice = OutputImage::copy_of(image.bytes, adhoc_signature_room(image.bytes.size(), identifier));
  add_adhoc_signature(slice, image.bytes.base(), identifier);
  return slice.to_vector();
}

HashedPages replace_unreadable_signature(OutputImage& slice, uint64_t file_offset, const std::string& identifier) {
  MachO image = parse_macho(slice.bytes(file_offset));
  if (!image.code_signature_command) fail("the slice is not signed: no signature to replace");
  const Segment* linkedit = image.segment("__LINKEDIT");
  uint64_t dataoff = image.code_signature.offset;
  uint64_t end = dataoff + image.code_signature.size;
  if (!linkedit || dataoff < linkedit->file_offset || end != image.bytes.size() ||
      linkedit->file_offset + linkedit->file_size != end)
    fail("cannot replace the unreadable signature: it does not end both __LINKEDIT and the slice");
  for (const DataRange* range : {&image.chained_fixups, &image.exports_trie, &image.dyld_info.bind,
                                 &image.dyld_info.lazy_bind, &image.dyld_info.weak_bind, &image.dyld_info.rebase,
                                 &image.dyld_info.exports})
    if (range->present && range->size > 0 && range->offset + range->size > dataoff)
      fail("cannot replace the unreadable signature: other __LINKEDIT data runs into it");
  if (image.symtab.present && image.symtab.strings_offset + image.symtab.strings_size > dataoff)
    fail("cannot replace the unreadable signature: the string table runs into it");
  // The slice up to the signature, __LINKEDIT ending there, without LC_CODE_SIGNATURE
  // (the commands after it move up; the freed bytes become zero header padding).
  LoadCommandList commands(image);
  std::vector<uint8_t> segment = commands.bytes(linkedit->command_index);
  put_u64(segment, offsetof(macho::SegmentCommand64, filesize), dataoff - linkedit->file_offset);
  commands.replace(linkedit->command_index, std::move(segment));
  commands.remove(*image.code_signature_command);
  slice.resize(dataoff);
  commands.write(image, slice);
  return add_adhoc_signature(slice, file_offset, identifier);
}

std::vector<uint8_t> replace_unreadable_signature(const MachO& image, const std::string& identifier) {
  OutputImage slice = OutputImage::copy_of(image.bytes, adhoc_signature_room(image.bytes.size(), identifier));
  replace_unreadable_signature(slice, image.bytes.base(), identifier);
  return slice.to_vector();
}

std::string default_identifier(const MachO& image, const std::string& file_name) {
  return last_path_component(image.id_name && !image.id_name->empty() ? *image.id_name : file_name);
}

}  // namespace machofix
