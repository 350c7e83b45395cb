// Loader rules on LC_DYLD_CHAINED_FIXUPS, in the order of
// mach_o::ChainedFixups::valid (dyld, mach_o/ChainedFixups.cpp): the header, the
// starts of each segment, the imports count the pointer format can address; then
// every import's library ordinal (dyld3 MachOAnalyzer::validChainedFixupsInfo).
// Like dyld, the header and starts checks stop at the first problem.
#include "core/base/error.h"
#include "core/format/loader_rules_internal.h"
#include "core/format/macho_format.h"
#include "core/format/macho_structs.h"

namespace machofix::rules {

using namespace macho;

namespace {

using Starts = ChainedStartsInSegment;
// page_start[page_count] (u16 each) follows dyld_chained_starts_in_segment's fixed part.
constexpr uint64_t kPageStart = sizeof(Starts);
constexpr uint16_t kStartNone = 0xffff, kStartMulti = 0x8000, kStartLast = 0x8000;
constexpr uint16_t kPointerFormatCount = 15;  // DYLD_CHAINED_PTR_ARM64E (1) ... ARM64E_SEGMENTED (14)

struct Header {
  uint32_t starts, imports, symbols, count, format;
};

uint64_t import_size(uint32_t format) { return format == DYLD_CHAINED_IMPORT ? 4 : format == DYLD_CHAINED_IMPORT_ADDEND ? 8 : 16; }

class ChainedCheck {
 public:
  ChainedCheck(Check& check, const Bytes& fixups) : check_(check), fixups_(fixups) {}

  void run() {
    if (!header() || !starts() || !imports_count()) return;
    import_ordinals();
  }

 private:
  bool fail(const char* rule, uint64_t at, const std::string& message) {
    check_.add(rule, fixups_.base() - check_.bytes.base() + at, "chained fixups, " + message);
    return false;
  }

  bool header() {
    if (fixups_.size() < sizeof(ChainedFixupsHeader))
      return fail("chained-header", 0, "header (28 bytes) does not fit in LC_DYLD_CHAINED_FIXUPS");
    ChainedFixupsHeader header = fixups_.get<ChainedFixupsHeader>(0, "chained fixups header");
    uint32_t version = header.fixups_version;
    header_ = {header.starts_offset, header.imports_offset, header.symbols_offset, header.imports_count, header.imports_format};
    if (version != 0)
      return fail("chained-header", offsetof(ChainedFixupsHeader, fixups_version), "unknown header version (" + std::to_string(version) + ")");
    if (header_.starts >= fixups_.size())
      return fail("chained-header", offsetof(ChainedFixupsHeader, starts_offset), "starts_offset exceeds LC_DYLD_CHAINED_FIXUPS size");
    if (header_.imports > fixups_.size())
      return fail("chained-header", offsetof(ChainedFixupsHeader, imports_offset), "imports_offset exceeds LC_DYLD_CHAINED_FIXUPS size");
    if (header_.format < DYLD_CHAINED_IMPORT || header_.format > DYLD_CHAINED_IMPORT_ADDEND64)
      return fail("chained-header", offsetof(ChainedFixupsHeader, imports_format), "unknown imports_format (" + std::to_string(header_.format) + ")");
    if (uint64_t(header_.imports) + import_size(header_.format) * header_.count > header_.symbols)
      return fail("chained-header", offsetof(ChainedFixupsHeader, imports_count), "imports array overlaps symbols");
    if (uint32_t symbols_format = header.symbols_format)
      return fail("chained-header", offsetof(ChainedFixupsHeader, symbols_format), "symbols_format unknown (" + std::to_string(symbols_format) + ")");
    return true;
  }

  bool starts() {
    // dyld_chained_starts_in_image: seg_count, then seg_info_offset[seg_count] (u32 each).
    uint32_t count = fixups_.u32(header_.starts);  // starts < size, and the header is 28 bytes in
    if (!fits(header_.starts, sizeof(uint32_t) * (1 + uint64_t(count)), fixups_.size()))
      return fail("chained-starts", header_.starts, "seg_info_offset table of " + std::to_string(count) + " segments runs past the data");
    size_t segments = check_.all(LC_SEGMENT_64).size();
    if (count > segments) return fail("chained-seg-count", header_.starts, "seg_count exceeds number of segments");
    // ctf_insert adds a __CTF segment after linking without updating the starts.
    if (count < segments && (check_.segments.empty() || check_.segments.back().name != "__CTF"))
      return fail("chained-seg-count", header_.starts, "seg_count (" + std::to_string(count) + ") does not match number of segments (" +
                                                           std::to_string(segments) + ")");
    for (uint32_t i = 0; i < count; ++i) {
      uint32_t info = fixups_.u32(header_.starts + sizeof(uint32_t) * (1 + uint64_t(i)));
      if (info && !segment_starts(i, header_.starts + uint64_t(info))) return false;
    }
    return true;
  }

  bool segment_starts(uint32_t index, uint64_t at) {
    std::string segment = "segment #" + std::to_string(index);
    uint64_t end_of_starts = header_.imports;
    if (at > end_of_starts || end_of_starts - at < kPageStart)
      return fail("chained-starts", at, "dyld_chained_starts_in_segment for " + segment + " overruns imports table");
    Starts starts = fixups_.get<Starts>(at, "dyld_chained_starts_in_segment");  // before the imports, checked above
    uint32_t size = starts.size;
    if (size > end_of_starts - at)
      return fail("chained-starts", at + offsetof(Starts, size), "dyld_chained_starts_in_segment for " + segment + " overruns imports table");
    uint16_t page_size = starts.page_size, format = starts.pointer_format;
    if (page_size != 0x1000 && page_size != 0x4000)
      return fail("chained-starts", at + offsetof(Starts, page_size), "page_size not 4KB or 16KB in " + segment);
    if (format == 0 || format >= kPointerFormatCount)
      return fail("chained-starts", at + offsetof(Starts, pointer_format), "unknown pointer_format in " + segment);
    if (!pointer_format_) pointer_format_ = format;
    if (format != *pointer_format_)
      return fail("chained-starts", at + offsetof(Starts, pointer_format), "pointer_format not same for all segments " + std::to_string(format) + " and " +
                                                             std::to_string(*pointer_format_));
    if (uint32_t max_valid = starts.max_valid_pointer) {
      if (max_valid_pointer_ && max_valid != max_valid_pointer_)
        return fail("chained-starts", at + offsetof(Starts, max_valid_pointer), "different max_valid_pointer values seen in different segments");
      max_valid_pointer_ = max_valid;
    }
    uint16_t pages = starts.page_count;
    if (kPageStart + sizeof(uint16_t) * uint64_t(pages) > size)
      return fail("chained-starts", at + offsetof(Starts, page_count), "page_start array overflows size");
    return page_starts(segment, at, size, page_size, pages);
  }

  bool page_starts(const std::string& segment, uint64_t at, uint32_t size, uint16_t page_size, uint16_t pages) {
    uint64_t max_overflow = (size - kPageStart) / sizeof(uint16_t);
    auto start_at = [&](uint64_t i) { return at + kPageStart + sizeof(uint16_t) * i; };
    auto start = [&](uint64_t i) { return fixups_.u16(start_at(i)); };
    for (uint64_t page = 0; page < pages; ++page) {
      uint16_t offset = start(page);
      if (offset == kStartNone) continue;
      if (!(offset & kStartMulti)) {
        if (offset > page_size)
          return fail("chained-starts", start_at(page), "in " + segment + " page_start[" + std::to_string(page) + "]=" +
                                                                        hex(offset) + " exceeds page size");
        continue;
      }
      uint16_t last = 0;
      for (uint64_t overflow = offset & ~kStartMulti;; ++overflow) {
        if (overflow >= max_overflow)
          return fail("chained-starts", start_at(page), "chain overflow index out of range " + std::to_string(overflow) +
                                                                        " (max=" + std::to_string(max_overflow) + ") in " + segment);
        uint16_t entry = start(overflow), in_page = entry & ~kStartLast;
        if (in_page > page_size || (in_page <= last && last != 0))
          return fail("chained-starts", start_at(overflow), "in " + segment + " overflow page_start[" +
                                                                            std::to_string(overflow) + "]=" + hex(in_page) +
                                                                            (in_page > page_size ? " exceeds page size" : " is before the previous start"));
        last = in_page;
        if (entry & kStartLast) break;
      }
    }
    return true;
  }

  // The bind ordinal field of each pointer format bounds the import table
  // (ChainedFixups::PointerFormat::maxBindOrdinal): formats whose binds carry one.
  bool imports_count() {
    if (!pointer_format_) return true;
    unsigned bits = 0;
    switch (*pointer_format_) {
      case 1: case 9: bits = 16; break;       // DYLD_CHAINED_PTR_ARM64E, ARM64E_USERLAND
      case 2: case 6: case 12: bits = 24; break;  // PTR_64, PTR_64_OFFSET, ARM64E_USERLAND24
      case 3: bits = 20; break;               // PTR_32
      default: return true;
    }
    uint64_t max = uint64_t(1) << bits;
    if (header_.count >= max)
      return fail("chained-imports-count", offsetof(ChainedFixupsHeader, imports_count), "imports_count (" + std::to_string(header_.count) + ") exceeds max of " +
                                                              std::to_string(max) + " for pointer format " + std::to_string(*pointer_format_));
    return true;
  }

  void import_ordinals() {
    uint64_t entry_size = import_size(header_.format);
    for (uint64_t i = 0; i < header_.count; ++i) {
      uint64_t at = header_.imports + i * entry_size;
      if (!fits(at, entry_size, fixups_.size())) return;  // the reader refuses a table past the data
      int64_t ordinal;
      if (header_.format == DYLD_CHAINED_IMPORT_ADDEND64) {
        uint16_t raw = fixups_.u16(at);
        ordinal = chained_ordinal(raw);
      } else {
        uint8_t raw = fixups_.u8(at);
        ordinal = chained_ordinal(raw);
      }
      check_chained_ordinal(check_, ordinal, fixups_.base() - check_.bytes.base() + at);
    }
  }

  Check& check_;
  const Bytes& fixups_;
  Header header_{};
  std::optional<uint16_t> pointer_format_;
  uint32_t max_valid_pointer_ = 0;
};

}  // namespace

void check_chained_fixups(Check& check, const Bytes& fixups) { ChainedCheck(check, fixups).run(); }

}  // namespace machofix::rules
