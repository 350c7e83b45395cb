// The segment model (core/format/segments.h): segment_command_64 and section_64
// fields read into Segment and Section.
#include "core/format/segments.h"

#include "core/format/macho_format.h"
#include "core/format/macho_structs.h"

namespace machofix {

using namespace macho;

bool Segment::executable() const { return initprot & VM_PROT_EXECUTE; }

Segment read_segment_command(const Bytes& command, uint64_t command_offset, size_t command_index) {
  SegmentCommand64 fields = command.get<SegmentCommand64>(0, "LC_SEGMENT_64");
  Segment segment;
  segment.name = command.fixed_string(offsetof(SegmentCommand64, segname), sizeof fields.segname, "segment name");
  segment.vmaddr = fields.vmaddr;
  segment.vmsize = fields.vmsize;
  segment.file_offset = fields.fileoff;
  segment.file_size = fields.filesize;
  segment.initprot = fields.initprot;
  segment.flags = fields.flags;
  segment.command_index = command_index;
  segment.command_offset = command_offset;
  return segment;
}

uint32_t declared_section_count(const Bytes& command) {
  return command.get<SegmentCommand64>(0, "LC_SEGMENT_64").nsects;
}

uint64_t section_room(const Bytes& command) { return (command.size() - sizeof(SegmentCommand64)) / sizeof(Section64); }

void read_sections(const Bytes& command, uint64_t count, Segment& segment) {
  for (uint64_t i = 0; i < count; ++i) {
    uint64_t at = sizeof(SegmentCommand64) + i * sizeof(Section64);
    Section64 header = command.get<Section64>(at, "section");
    Section section;
    section.name = command.fixed_string(at + offsetof(Section64, sectname), sizeof header.sectname, "section name");
    section.segment_name = command.fixed_string(at + offsetof(Section64, segname), sizeof header.segname, "section segment name");
    section.address = header.addr;
    section.size = header.size;
    section.file_offset = header.offset;
    section.flags = header.flags;
    section.header_offset = segment.command_offset + at;
    segment.sections.push_back(std::move(section));
  }
}

const Segment* segment_named(const std::vector<Segment>& segments, const std::string& name) {
  for (const Segment& segment : segments)
    if (segment.name == name) return &segment;
  return nullptr;
}

}  // namespace machofix
