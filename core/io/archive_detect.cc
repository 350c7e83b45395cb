// Is this an archive of models? A zip, a checksummed tar header, or a compressed
// stream whose first block decompresses to one: recognised by content, never by name.
#include <archive.h>
#include <archive_entry.h>

#include <algorithm>
#include <cstdint>
#include <new>
#include <optional>
#include <string_view>
#include <vector>

#include "core/io/archive.h"
#include "core/io/archive_internal.h"

namespace machofix {

using namespace archive_io;

namespace {

// looks_like_archive decompresses at most this much of a compressed head.
constexpr uint64_t kProbeInput = uint64_t{1} << 20;

// A tar numeric field: octal digits, perhaps led by spaces and ended by a space or NUL.
std::optional<uint64_t> octal_field(const Bytes& block, uint64_t offset, uint64_t length) {
  uint64_t value = 0;
  bool digits = false, ended = false;
  for (uint64_t i = 0; i < length; ++i) {
    uint8_t c = block.u8(offset + i, "tar header field");
    if (c >= '0' && c <= '7' && !ended) {
      value = value * 8 + (c - '0');
      digits = true;
    } else if (c == ' ' || c == 0) {
      ended = digits;
    } else {
      return std::nullopt;
    }
  }
  if (!digits) return std::nullopt;
  return value;
}

// A ustar header (POSIX "ustar\0" or GNU "ustar ") whose checksum is right: the magic
// alone could occur in other data by chance. Old writers summed signed chars; both count.
bool is_tar_header(const Bytes& block) {
  if (block.size() < kTarBlock || !has_bytes(block, 257, "ustar")) return false;
  std::optional<uint64_t> stored = octal_field(block, 148, 8);
  if (!stored) return false;
  uint64_t unsigned_sum = 0;
  int64_t signed_sum = 0;
  for (uint64_t i = 0; i < kTarBlock; ++i) {
    uint8_t c = (i >= 148 && i < 156) ? ' ' : block.u8(i, "tar header");
    unsigned_sum += c;
    signed_sum += static_cast<int8_t>(c);
  }
  return unsigned_sum == *stored || signed_sum == static_cast<int64_t>(*stored);
}

bool is_compressed(const Bytes& head) {
  return has_bytes(head, 0, "\x1f\x8b") || has_bytes(head, 0, std::string_view("\xfd" "7zXZ\0", 6)) ||
         has_bytes(head, 0, "\x28\xb5\x2f\xfd");
}

// Whether the first 512 bytes a compressed head decompresses to are a tar header.
bool decompresses_to_tar(const Bytes& head) {
  Bytes probe = head.sub(0, std::min(head.size(), kProbeInput), "compressed head");
  ReadHandle reader(archive_read_new());
  if (!reader) throw std::bad_alloc();
  support_filters(reader.get());
  archive_read_support_format_raw(reader.get());
  if (archive_read_open_memory(reader.get(), probe.data(), probe.size()) != ARCHIVE_OK) return false;
  archive_entry* entry = nullptr;
  if (archive_read_next_header(reader.get(), &entry) != ARCHIVE_OK) return false;
  std::vector<uint8_t> block(kTarBlock);
  size_t got = 0;
  while (got < block.size()) {
    la_ssize_t more = archive_read_data(reader.get(), block.data() + got, block.size() - got);
    if (more <= 0) break;
    got += static_cast<size_t>(more);
  }
  return got == block.size() && is_tar_header(Bytes(block));
}

}  // namespace

bool looks_like_archive(const Bytes& head) {
  if (has_bytes(head, 0, "PK\x03\x04") || has_bytes(head, 0, kEmptyZip)) return true;
  if (is_tar_header(head)) return true;
  return is_compressed(head) && decompresses_to_tar(head);
}

}  // namespace machofix
