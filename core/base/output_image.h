// The bytes of a slice being rewritten, paid for only where they change.
//
// A rewrite (prune, edit, weak link, re-signing) writes the load commands at the
// start of a slice and __LINKEDIT at its end; the code and data between are never
// written. An OutputImage is one range of memory holding the whole slice, where
//  - the head [0, borrowed().from) and the tail [borrowed().to, size()) are private
//    copies, which the rewrite writes (the tail may grow: a new signature);
//  - the middle [from, to) maps the input file again, read only and copy-on-write:
//    it costs memory only while a pass reads it, and a pass lets it go behind it
//    (core/base/mapped_pages.h). A write there is a bug, and faults.
// The writer copies the middle from the input file in the kernel and proves it there
// (core/io/macho_write.h); only the head and the tail are written from memory.
// Bytes that are not in a file mapping (a test's vector, a member of an archive in
// memory) make an OutputImage that is a private copy throughout, and borrow nothing.
#pragma once

#include <cstdint>
#include <vector>

#include "core/base/bytes.h"

namespace machofix {

class OutputImage {
 public:
  // A borrowed range: bytes [from, to) of the image are bytes [file_offset,
  // file_offset + to - from) of the file open as `fd` (an input's descriptor).
  struct Borrowed {
    uint64_t from = 0;
    uint64_t to = 0;
    int fd = -1;
    uint64_t file_offset = 0;
    uint64_t size() const { return to - from; }
  };

  OutputImage() = default;
  ~OutputImage();
  OutputImage(OutputImage&& other) noexcept;
  OutputImage& operator=(OutputImage&& other) noexcept;
  OutputImage(const OutputImage&) = delete;
  OutputImage& operator=(const OutputImage&) = delete;

  // A private copy of `input`, able to grow by `room` bytes.
  static OutputImage copy_of(const Bytes& input, uint64_t room = 0);
  // `input` with its whole pages inside [head_end, tail_start) borrowed from the file
  // behind it, when it lies in a registered file mapping; the rest a private copy.
  static OutputImage borrowing(const Bytes& input, uint64_t head_end, uint64_t tail_start, uint64_t room);
  // `size` zero bytes, to be filled with put_bytes_of (a universal file's slices).
  static OutputImage zeroed(uint64_t size);

  // Puts `source` at `at`: its whole pages borrowed from the file behind it where
  // that file and this image place them at the same offset within a page, else copied.
  void put_bytes_of(uint64_t at, const Bytes& source);
  // Puts the whole of `other` at `at`, borrowing what it borrows where it can.
  void put_image(uint64_t at, const OutputImage& other);

  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  Bytes bytes(uint64_t base = 0) const { return Bytes(data_, size_, base); }
  operator MutableBytes() { return MutableBytes(data_, size_); }  // NOLINT: an OutputImage is a buffer we write
  const std::vector<Borrowed>& borrowed() const { return borrowed_; }  // in order
  uint64_t borrowed_size() const;
  std::vector<uint8_t> to_vector() const { return std::vector<uint8_t>(data_, data_ + size_); }

  // Grows (zero bytes) or shrinks the end; never into a borrowed range, never past the
  // room asked for (internal errors).
  void resize(uint64_t size);

 private:
  void reserve(uint64_t lead, uint64_t capacity);
  void borrow(uint64_t from, uint64_t to, int fd, uint64_t file_offset);
  void require_unborrowed(uint64_t from, uint64_t to) const;
  void release();

  uint8_t* mapping_ = nullptr;  // the reserved range; data_ is `lead` bytes into it
  uint64_t mapping_size_ = 0;
  uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t capacity_ = 0;
  std::vector<Borrowed> borrowed_;
};

}  // namespace machofix
