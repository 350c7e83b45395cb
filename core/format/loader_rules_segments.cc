// Loader rules on segments and sections (dyld3 MachOAnalyzer::validSegments and
// validLoadCommands, mach_o::Header::validSemanticsSegments).
#include <algorithm>

#include "core/base/error.h"
#include "core/format/loader_rules_internal.h"
#include "core/format/macho_format.h"
#include "core/format/macho_structs.h"

namespace machofix::rules {

using namespace macho;

namespace {


// Tolerant where the reader refuses: a command too short for a segment_command_64 is
// skipped (lc-cmdsize-exact reports it), and of its sections only those that fit in
// cmdsize are read.
void read_segments(Check& check) {
  for (size_t index = 0; index < check.commands.size(); ++index) {
    const Command& command = check.commands[index];
    if (command.cmd != LC_SEGMENT_64 || command.size < sizeof(SegmentCommand64)) continue;
    Bytes body = check.body(command);
    Segment segment = read_segment_command(body, command.offset, index);
    read_sections(body, std::min<uint64_t>(declared_section_count(body), section_room(body)), segment);
    check.segments.push_back(std::move(segment));
  }
}

bool wraps(uint64_t start, uint64_t length) { return start + length < start; }

void check_each_segment(Check& check) {
  for (const Segment& segment : check.segments) {
    const std::string quoted = "segment '" + segment.name + "'";
    if (!fits(segment.file_offset, segment.file_size, check.bytes.size()))
      check.add("seg-in-file", segment.command_offset + offsetof(SegmentCommand64, fileoff), quoted + " load command content extends beyond end of file");
    if (segment.file_size > segment.vmsize && (segment.vmsize != 0 || !(segment.flags & SG_NORELOC)))
      check.add("seg-filesize-vmsize", segment.command_offset + offsetof(SegmentCommand64, filesize), quoted + " filesize exceeds vmsize");
    if (wraps(segment.vmaddr, segment.vmsize)) check.add("seg-vm-wrap", segment.command_offset + offsetof(SegmentCommand64, vmaddr), quoted + " vm range wraps");
    uint32_t rx = VM_PROT_READ | VM_PROT_EXECUTE;
    if (segment.name == "__TEXT") {
      if (segment.initprot != rx && check.enforced(Gate::TextPermissions))
        check.add("seg-protection", segment.command_offset + offsetof(SegmentCommand64, initprot), "__TEXT segment permissions is not 'r-x'");
    } else if (segment.name == "__LINKEDIT") {
      if (segment.initprot != VM_PROT_READ && check.enforced(Gate::LinkeditPermissions))
        check.add("seg-protection", segment.command_offset + offsetof(SegmentCommand64, initprot), "__LINKEDIT segment permissions is not 'r--'");
    } else if (segment.initprot & ~uint32_t(7)) {
      check.add("seg-protection", segment.command_offset + offsetof(SegmentCommand64, initprot), segment.name + " segment permissions has invalid bits set (" + hex(segment.initprot) + ")");
    }
  }
}

void check_text(Check& check) {
  const Segment* text = check.segment("__TEXT");
  if (!text) {
    check.add("seg-text", 16, "missing __TEXT segment");
    return;
  }
  uint64_t header_and_commands = sizeof(MachHeader64) + check.sizeofcmds;
  if (text->file_offset != 0) check.add("seg-text", text->command_offset + offsetof(SegmentCommand64, fileoff), "__TEXT segment not start of mach-o");
  if (text->file_size < header_and_commands)
    check.add("seg-text", text->command_offset + offsetof(SegmentCommand64, filesize), "load commands exceed length of __TEXT segment");
  else if (text->vmsize < header_and_commands)
    check.add("seg-text", text->command_offset + offsetof(SegmentCommand64, vmsize), "load commands do not fit in __TEXT segment vmsize");
  if (!check.segment("__LINKEDIT")) check.add("seg-linkedit", 16, "missing __LINKEDIT segment");
}

// Non-empty ranges that share a byte.
bool overlap(uint64_t a, uint64_t a_size, uint64_t b, uint64_t b_size) {
  return a_size && b_size && a < b + b_size && b < a + a_size;
}

bool static_executable(const Check& check) { return check.filetype == MH_EXECUTE && !check.first(LC_LOAD_DYLINKER); }

void check_pairs(Check& check) {
  const std::vector<Segment>& segments = check.segments;
  bool order_enforced = check.enforced(Gate::SegmentOrder) && !static_executable(check);
  for (size_t j = 0; j < segments.size(); ++j) {
    const Segment& later = segments[j];
    for (size_t i = 0; i < j; ++i) {
      const Segment& earlier = segments[i];
      std::string pair = "segment " + earlier.name + " and segment " + later.name;
      if (overlap(earlier.vmaddr, earlier.vmsize, later.vmaddr, later.vmsize))
        check.add("seg-overlap", later.command_offset + offsetof(SegmentCommand64, vmaddr), "vm range of " + pair + " overlap");
      if (overlap(earlier.file_offset, earlier.file_size, later.file_offset, later.file_size))
        check.add("seg-overlap", later.command_offset + offsetof(SegmentCommand64, fileoff), "file content of " + pair + " overlap");
      bool out_of_order = earlier.vmaddr > later.vmaddr ||
                          (earlier.file_offset > later.file_offset && earlier.file_offset != 0 && later.file_offset != 0);
      // dyld lets the Go linker's __DWARF segment sit anywhere.
      if (out_of_order && order_enforced && earlier.name != "__DWARF" && later.name != "__DWARF")
        check.add("seg-order", later.command_offset, "segment load commands out of order with respect to layout for " + earlier.name +
                                             " and " + later.name);
    }
  }
}

void check_sections(Check& check) {
  bool end_enforced = check.enforced(Gate::SectionsInSegment);
  for (const Segment& segment : check.segments) {
    for (const Section& section : segment.sections) {
      std::string quoted = "section '" + section.name + "'";
      if (static_cast<int64_t>(section.size) < 0)
        check.add("sect-in-segment", section.header_offset + offsetof(Section64, size), quoted + " size too large " + hex(section.size));
      else if (section.address < segment.vmaddr)
        check.add("sect-in-segment", section.header_offset + offsetof(Section64, addr), quoted + " start address " + hex(section.address) +
                                                          " is before containing segment's address " + hex(segment.vmaddr));
      else if (end_enforced && section.address + section.size > segment.vmaddr + segment.vmsize)
        check.add("sect-in-segment", section.header_offset + offsetof(Section64, size), quoted + " end address " + hex(section.address + section.size) +
                                                          " is beyond containing segment's end address " +
                                                          hex(segment.vmaddr + segment.vmsize));
    }
  }
}

}  // namespace

void check_segments(Check& check) {
  read_segments(check);
  check_each_segment(check);
  check_text(check);
  check_pairs(check);
  check_sections(check);
}

}  // namespace machofix::rules
