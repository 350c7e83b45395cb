// The segment model: an LC_SEGMENT_64 and its section_64s, as the reader
// (core/format/macho.cc) and the loader rules (core/format/loader_rules_segments.cc)
// both see them. The fields are read here, once; what to refuse stays with each
// caller, since the rules judge files the reader refuses.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/base/bytes.h"

namespace machofix {

struct Section {
  std::string segment_name;  // as its section_64 says, which may differ from its segment's
  std::string name;
  uint64_t address = 0;
  uint64_t size = 0;
  uint32_t file_offset = 0;
  uint32_t flags = 0;          // the type in the low byte, attributes above
  uint64_t header_offset = 0;  // its section_64, from the start of the slice
};

struct Segment {
  std::string name;
  uint64_t vmaddr = 0;
  uint64_t vmsize = 0;
  uint64_t file_offset = 0;
  uint64_t file_size = 0;
  uint32_t initprot = 0;        // VM_PROT_* it is mapped with
  uint32_t flags = 0;           // SG_*
  size_t command_index = 0;     // its load command's index, in load-command order
  uint64_t command_offset = 0;  // its segment_command_64, from the start of the slice
  std::vector<Section> sections;

  bool executable() const;
};

// `command` holds a whole segment_command_64 (the caller checked its size), at
// `command_offset` in the slice. Reads its fields, not its sections.
Segment read_segment_command(const Bytes& command, uint64_t command_offset, size_t command_index);
// nsects, and how many section_64s the command's cmdsize has room for: a file can
// claim more than fit.
uint32_t declared_section_count(const Bytes& command);
uint64_t section_room(const Bytes& command);
// Appends the first `count` section_64s (at most section_room) to `segment`.
void read_sections(const Bytes& command, uint64_t count, Segment& segment);

// The first segment named `name`, or nullptr.
const Segment* segment_named(const std::vector<Segment>& segments, const std::string& name);

}  // namespace machofix
