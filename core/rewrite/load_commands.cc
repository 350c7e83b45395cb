#include "core/rewrite/load_commands.h"

#include <algorithm>

#include "core/format/macho_format.h"
#include "core/format/macho_structs.h"
#include "core/base/util.h"

namespace machofix {

namespace {

uint32_t read_u32(const std::vector<uint8_t>& command, uint64_t offset) {
  return Bytes(command).u32(offset, "load command field");
}

void check_command(const std::vector<uint8_t>& command) {
  if (command.size() < sizeof(macho::LoadCommand) || command.size() % macho::kCommandAlign64 != 0 ||
      read_u32(command, offsetof(macho::LoadCommand, cmdsize)) != command.size())
    fail_as(ErrorKind::Internal, "internal error: a load command of " + std::to_string(command.size()) + " bytes with a cmdsize that does not match");
}

// The first byte of every LINKEDIT range the image places, to bound the padding.
void lower_to_linkedit(const MachO& image, uint64_t& end) {
  auto lower = [&](const DataRange& range) {
    if (range.present && range.size) end = std::min(end, range.offset);
  };
  for (const DataRange* range : {&image.dyld_info.rebase, &image.dyld_info.bind, &image.dyld_info.weak_bind,
                                 &image.dyld_info.lazy_bind, &image.dyld_info.exports, &image.chained_fixups,
                                 &image.exports_trie, &image.code_signature})
    lower(*range);
  if (image.symtab.present && image.symtab.symbol_count) end = std::min(end, image.symtab.symbols_offset);
  if (image.symtab.present && image.symtab.strings_size) end = std::min(end, image.symtab.strings_offset);
}

}  // namespace

LoadCommandList::LoadCommandList(const MachO& image) {
  for (size_t i = 0; i < image.commands.size(); ++i) {
    const LoadCommand& command = image.commands[i];
    Bytes body = image.bytes.sub(command.offset, command.size, "load command");
    commands_.emplace_back(body.data(), body.data() + body.size());
    origins_.push_back(i);
  }
  original_ = commands_;
}

uint32_t LoadCommandList::cmd(size_t index) const { return read_u32(commands_.at(index), offsetof(macho::LoadCommand, cmd)); }

void LoadCommandList::replace(size_t index, std::vector<uint8_t> command) {
  check_command(command);
  commands_.at(index) = std::move(command);
}

void LoadCommandList::insert(size_t index, std::vector<uint8_t> command) {
  check_command(command);
  if (index > commands_.size()) fail_as(ErrorKind::Internal, "internal error: a load command inserted past the end");
  commands_.insert(commands_.begin() + index, std::move(command));
  origins_.insert(origins_.begin() + index, std::nullopt);
}

void LoadCommandList::remove(size_t index) {
  commands_.erase(commands_.begin() + index);
  origins_.erase(origins_.begin() + index);
}

uint64_t LoadCommandList::sizeofcmds() const {
  uint64_t total = 0;
  for (const std::vector<uint8_t>& command : commands_) total += command.size();
  return total;
}

bool LoadCommandList::changed() const { return commands_ != original_; }

void LoadCommandList::check_room(const MachO& image) const {
  uint64_t needed = sizeofcmds();
  uint64_t padding_end = header_padding_end(image);
  uint64_t available = padding_end - sizeof(macho::MachHeader64);
  if (needed > available || needed > UINT32_MAX) {
    Error error("the load commands would need " + std::to_string(needed) + " bytes, but only " + std::to_string(available) +
                    " are available before the first content at " + hex(padding_end) + " (" +
                    std::to_string(available - image.sizeofcmds) +
                    " bytes of header padding); nothing written (relink with a larger -headerpad, or use shorter names)",
                image.bytes.base() + offsetof(macho::MachHeader64, sizeofcmds));
    throw error.as_refusal();
  }
}

void LoadCommandList::write(const MachO& image, MutableBytes out) const {
  check_room(image);
  uint64_t needed = sizeofcmds();
  uint64_t area = std::max<uint64_t>(needed, image.sizeofcmds);
  std::vector<uint8_t> bytes;
  bytes.reserve(area);
  for (const std::vector<uint8_t>& command : commands_) bytes.insert(bytes.end(), command.begin(), command.end());
  bytes.resize(area, 0);  // freed bytes become zero, like unused header padding
  put_bytes(out, sizeof(macho::MachHeader64), bytes.data(), bytes.size());
  put_u32(out, offsetof(macho::MachHeader64, ncmds), ncmds());
  put_u32(out, offsetof(macho::MachHeader64, sizeofcmds), static_cast<uint32_t>(needed));
}

uint64_t header_padding_end(const MachO& image) {
  uint64_t end = image.first_section_offset();
  for (const Segment& segment : image.segments)
    if (segment.file_offset && segment.file_size) end = std::min(end, segment.file_offset);
  lower_to_linkedit(image, end);
  return std::max(end, image.load_commands_end());  // parse_macho refuses commands past it
}

std::string command_string(const std::vector<uint8_t>& command, uint64_t field) {
  Bytes body(command);
  uint32_t offset = body.u32(field, "load command string offset");
  return std::string(body.cstr(offset, "load command string"));
}

std::vector<uint8_t> with_command_string(const std::vector<uint8_t>& command, uint64_t field, const std::string& text) {
  uint32_t offset = read_u32(command, field);
  if (offset > command.size()) fail_as(ErrorKind::Internal, "internal error: a load command string offset outside the command");
  std::vector<uint8_t> result(command.begin(), command.begin() + offset);
  result.insert(result.end(), text.begin(), text.end());
  result.resize(align_up(result.size() + 1, macho::kCommandAlign64), 0);
  put_u32(result, offsetof(macho::LoadCommand, cmdsize), static_cast<uint32_t>(result.size()));
  return result;
}

std::vector<uint8_t> rpath_command(const std::string& path) {
  macho::RpathCommand fixed;
  fixed.cmd = macho::LC_RPATH;
  fixed.cmdsize = sizeof fixed;
  fixed.path_offset = sizeof fixed;  // the path follows the fixed part
  std::vector<uint8_t> command(sizeof fixed, 0);
  put(command, 0, fixed);
  return with_command_string(command, offsetof(macho::RpathCommand, path_offset), path);
}

}  // namespace machofix
