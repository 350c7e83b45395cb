// Structural editing of a slice's load-command area: the one place that replaces,
// inserts and removes load commands and writes ncmds and sizeofcmds (the model is
// LLVM ObjCopy's MachO Object: removeLoadCommands, updateLoadCommandIndexes, and the
// layout builder's header-padding check).
//
// A LoadCommandList starts as a copy of the slice's commands, each as its bytes. Edits
// change the list; write() puts the area back into the slice, shifting every command
// after a changed one. The area may grow into the header padding: the bytes between
// the end of the load commands and the first content the file places after them
// (section data, a segment's or LINKEDIT's data). When the padding is too small,
// write() refuses the slice naming the room needed and available.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/format/macho.h"

namespace machofix {

class LoadCommandList {
 public:
  explicit LoadCommandList(const MachO& image);

  size_t size() const { return commands_.size(); }
  uint32_t cmd(size_t index) const;
  const std::vector<uint8_t>& bytes(size_t index) const { return commands_.at(index); }
  // The index the command had in the input, or nullopt for one inserted since.
  std::optional<size_t> origin(size_t index) const { return origins_.at(index); }

  void replace(size_t index, std::vector<uint8_t> command);
  void insert(size_t index, std::vector<uint8_t> command);  // index == size(): append
  void remove(size_t index);

  uint32_t ncmds() const { return static_cast<uint32_t>(commands_.size()); }
  uint64_t sizeofcmds() const;
  bool changed() const;

  // Refuses (an Error marked as a refusal) when the commands do not fit before the
  // first content, naming the room needed and available.
  void check_room(const MachO& image) const;

  // Writes the area, ncmds and sizeofcmds into `out` (the slice's bytes): bytes the
  // area no longer covers become zero, like the rest of the padding. Throws an Error
  // marked as a refusal when the area does not fit before the first content.
  void write(const MachO& image, MutableBytes out) const;

 private:
  std::vector<std::vector<uint8_t>> commands_;
  std::vector<std::optional<size_t>> origins_;
  std::vector<std::vector<uint8_t>> original_;
};

// The file offset of the first content after the load commands: where the header
// padding ends.
uint64_t header_padding_end(const MachO& image);

// The string of a command with an lc_str at `field` (a dylib's install name, an
// rpath), read from bytes this module built or checked.
std::string command_string(const std::vector<uint8_t>& command, uint64_t field);

// A command with the fixed part of `command` (up to its string offset) and `text` as
// its string, cmdsize rounded up to 8 with zero bytes, as the linker and
// install_name_tool write it.
std::vector<uint8_t> with_command_string(const std::vector<uint8_t>& command, uint64_t field, const std::string& text);

// A new LC_RPATH naming `path`.
std::vector<uint8_t> rpath_command(const std::string& path);

}  // namespace machofix
