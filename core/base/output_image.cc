#include "core/base/output_image.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "core/base/mapped_pages.h"
#include "core/base/util.h"

#ifndef MAP_NORESERVE
#define MAP_NORESERVE 0
#endif

namespace machofix {

OutputImage::~OutputImage() { release(); }

OutputImage::OutputImage(OutputImage&& other) noexcept { *this = std::move(other); }

OutputImage& OutputImage::operator=(OutputImage&& other) noexcept {
  if (this == &other) return *this;
  release();
  mapping_ = std::exchange(other.mapping_, nullptr);
  mapping_size_ = std::exchange(other.mapping_size_, 0);
  data_ = std::exchange(other.data_, nullptr);
  size_ = std::exchange(other.size_, 0);
  capacity_ = std::exchange(other.capacity_, 0);
  borrowed_ = std::exchange(other.borrowed_, {});
  return *this;
}

void OutputImage::release() {
  if (!mapping_) return;
  for (const Borrowed& range : borrowed_) unregister_read_only_mapping(data_ + range.from);
  munmap(mapping_, mapping_size_);
  mapping_ = nullptr;
  borrowed_.clear();
}

uint64_t OutputImage::borrowed_size() const {
  uint64_t total = 0;
  for (const Borrowed& range : borrowed_) total += range.size();
  return total;
}

// Anonymous memory for `lead` + `capacity` bytes, costing nothing until written.
void OutputImage::reserve(uint64_t lead, uint64_t capacity) {
  mapping_size_ = std::max(align_up(lead + capacity, system_page_size()), system_page_size());
  void* mapped = mmap(nullptr, mapping_size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANON | MAP_NORESERVE, -1, 0);
  if (mapped == MAP_FAILED) fail_system("cannot reserve memory for the output");
  mapping_ = static_cast<uint8_t*>(mapped);
  data_ = mapping_ + lead;
  capacity_ = capacity;
}

// Nothing is put over a borrowed range: its pages are read only.
void OutputImage::require_unborrowed(uint64_t from, uint64_t to) const {
  for (const Borrowed& range : borrowed_)
    if (from < range.to && range.from < to) fail_as(ErrorKind::Internal, "internal error: bytes put over a borrowed range of the output");
}

// Maps [from, to) (whole pages of this image) read only from the file.
void OutputImage::borrow(uint64_t from, uint64_t to, int fd, uint64_t file_offset) {
  void* mapped = mmap(data_ + from, to - from, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, static_cast<off_t>(file_offset));
  if (mapped == MAP_FAILED) fail_system("cannot map the input into the output");
  register_read_only_mapping(data_ + from, to - from, fd, file_offset);
  auto place = std::find_if(borrowed_.begin(), borrowed_.end(), [&](const Borrowed& range) { return range.from > from; });
  borrowed_.insert(place, {from, to, fd, file_offset});
}

OutputImage OutputImage::copy_of(const Bytes& input, uint64_t room) {
  OutputImage image;
  image.reserve(0, input.size() + room);
  image.size_ = input.size();
  if (input.size()) std::memcpy(image.data_, input.data(), input.size());
  return image;
}

OutputImage OutputImage::zeroed(uint64_t size) {
  OutputImage image;
  image.reserve(0, size);
  image.size_ = size;
  return image;
}

OutputImage OutputImage::borrowing(const Bytes& input, uint64_t head_end, uint64_t tail_start, uint64_t room) {
  std::optional<FileBehind> file = file_behind(input.data(), input.size());
  if (!file || tail_start > input.size() || head_end >= tail_start) return copy_of(input, room);
  OutputImage image;
  image.reserve(file->offset % system_page_size(), input.size() + room);  // byte 0 where it is within its page in the file
  image.size_ = input.size();
  std::memcpy(image.data_, input.data(), head_end);
  image.put_bytes_of(head_end, Bytes(input.data() + head_end, tail_start - head_end));
  std::memcpy(image.data_ + tail_start, input.data() + tail_start, input.size() - tail_start);
  return image;
}

void OutputImage::put_bytes_of(uint64_t at, const Bytes& source) {
  if (!fits(at, source.size(), size_)) fail_as(ErrorKind::Internal, "internal error: bytes put past the end of the output");
  require_unborrowed(at, at + source.size());
  std::optional<FileBehind> file = file_behind(source.data(), source.size());
  uint64_t page = system_page_size(), address = reinterpret_cast<uint64_t>(data_ + at);
  uint64_t first_page = align_up(address, page), end_page = (address + source.size()) / page * page;
  if (!file || (file->offset % page) != (address % page) || end_page <= first_page) {
    if (source.size()) std::memcpy(data_ + at, source.data(), source.size());
    return;
  }
  uint64_t from = at + (first_page - address), to = at + (end_page - address);
  std::memcpy(data_ + at, source.data(), from - at);
  borrow(from, to, file->fd, file->offset + (from - at));
  std::memcpy(data_ + to, source.data() + (to - at), at + source.size() - to);
}

void OutputImage::put_image(uint64_t at, const OutputImage& other) {
  if (!fits(at, other.size_, size_)) fail_as(ErrorKind::Internal, "internal error: a slice put past the end of the output");
  require_unborrowed(at, at + other.size_);
  uint64_t position = 0;
  for (const Borrowed& range : other.borrowed_) {
    std::memcpy(data_ + at + position, other.data_ + position, range.from - position);
    put_bytes_of(at + range.from, Bytes(other.data_ + range.from, range.size()));
    position = range.to;
  }
  std::memcpy(data_ + at + position, other.data_ + position, other.size_ - position);
}

void OutputImage::resize(uint64_t size) {
  if (size > capacity_) fail_as(ErrorKind::Internal, "internal error: the output outgrew the room reserved for it");
  if (!borrowed_.empty() && size < borrowed_.back().to) fail_as(ErrorKind::Internal, "internal error: the output shrank into a borrowed range");
  if (size > size_) std::memset(data_ + size_, 0, size - size_);
  size_ = size;
}

}  // namespace machofix
