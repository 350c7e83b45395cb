#include "core/io/macho_write.h"

#include <algorithm>

#include "core/io/copy_check.h"

namespace machofix {

namespace {

const OutputImage::Borrowed& from_input(const OutputImage::Borrowed& range, const MappedFile& input) {
  if (range.fd != input.fd()) fail("internal error: the output borrows from another file than its input");
  return range;
}

bool moved(const OutputImage::Borrowed& range) { return range.file_offset != range.from; }

// How far into the input the early copy is of use: up to the first range the image
// borrows at another offset (a universal file laid out again: every slice after one
// that grew moves), or all of it. Past that it copies bytes that go elsewhere.
uint64_t kept_in_place(const OutputImage& image, const MappedFile& input) {
  uint64_t limit = UINT64_MAX;
  for (const OutputImage::Borrowed& range : image.borrowed())
    if (moved(from_input(range, input))) limit = std::min(limit, range.file_offset);
  return limit;
}

}  // namespace

void write_macho_file(const MappedFile& input, const OutputImage& image, CopiedOutput& output, ProgressMeter* progress) {
  uint64_t kept = output.keep_copy(kept_in_place(image, input), image.size());
  AtomicOutput& file = output.output();
  // In order, so that the file grows from the end of the early copy without holes.
  uint64_t position = 0;
  for (const OutputImage::Borrowed& range : image.borrowed()) {
    file.write_reporting(position, image.data() + position, range.from - position, progress);
    uint64_t held = held_by_early_copy(range.file_offset, range.from, range.size(), kept);
    if (progress) progress->add(held);
    copy_and_check(input.fd(), file, output.checker(), range.file_offset + held, range.from + held, range.size() - held,
                   progress);
    position = range.to;
  }
  file.write_reporting(position, image.data() + position, image.size() - position, progress);
  output.checker().finish();
  file.commit();
}

}  // namespace machofix
