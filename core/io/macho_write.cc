#include "core/io/macho_write.h"

#include <algorithm>

#include "core/io/copy_check.h"

namespace machofix {

namespace {

const OutputImage::Borrowed& from_input(const OutputImage::Borrowed& range, const MappedFile& input) {
  if (range.fd != input.fd()) fail("internal error: the output borrows from another file than its input");
  return range;
}

// Whether the early copy of `input` already holds every byte `image` borrows: each
// borrowed range is at its own offset (the size may differ: what follows the last
// one is written from memory, the file cut or extended to the image's size).
bool keeps_layout(const OutputImage& image, const MappedFile& input) {
  return std::all_of(image.borrowed().begin(), image.borrowed().end(), [&](const OutputImage::Borrowed& range) {
    return from_input(range, input).file_offset == range.from;
  });
}

// Calls `mine(from, to)` for each range of `image` it does not borrow, in order.
template <typename Mine>
void for_each_own_range(const OutputImage& image, Mine mine) {
  uint64_t position = 0;
  for (const OutputImage::Borrowed& range : image.borrowed()) {
    mine(position, range.from);
    position = range.to;
  }
  mine(position, image.size());
}

}  // namespace

void write_macho_file(const MappedFile& input, const OutputImage& image, CopiedOutput& output, ProgressMeter* progress) {
  AtomicOutput& file = output.output();
  auto write_own = [&](uint64_t from, uint64_t to) { file.write_reporting(from, image.data() + from, to - from, progress); };
  if (keeps_layout(image, input)) {
    output.finish_copy(image.size());
    for_each_own_range(image, write_own);
    if (progress)
      for (const OutputImage::Borrowed& range : image.borrowed()) progress->add(range.size());  // copied early
  } else {
    output.abandon_copy(image.size());
    for_each_own_range(image, write_own);
    for (const OutputImage::Borrowed& range : image.borrowed())
      copy_and_check(input.fd(), file, output.checker(), from_input(range, input).file_offset, range.from, range.size(),
                     progress);
  }
  output.checker().finish();
  file.commit();
}

}  // namespace machofix
