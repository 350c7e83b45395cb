#include "core/io/macho_write.h"

#include <algorithm>

#include "core/io/copy_check.h"

namespace machofix {

namespace {

const OutputImage::Borrowed& from_input(const OutputImage::Borrowed& range, const MappedFile& input) {
  if (range.fd != input.fd()) fail_as(ErrorKind::Internal, "internal error: the output borrows from another file than its input");
  return range;
}

// The input ranges the image borrows, where it puts them.
std::vector<CopiedRange> wanted_ranges(const OutputImage& image, const MappedFile& input) {
  std::vector<CopiedRange> wanted;
  for (const OutputImage::Borrowed& range : image.borrowed())
    wanted.push_back({from_input(range, input).file_offset, range.from, range.size()});
  return wanted;
}

}  // namespace

void write_macho_file(const MappedFile& input, const OutputImage& image, CopiedOutput& output, ProgressMeter* progress) {
  std::vector<CopiedRange> wanted = wanted_ranges(image, input);
  std::vector<CopiedRange> kept = output.keep_copy(first_unheld(output.plan(), wanted), image.size());
  AtomicOutput& file = output.output();
  // In order, so that past the early copy the file grows from its end without holes.
  uint64_t position = 0;
  for (const CopiedRange& range : wanted) {
    file.write_reporting(position, image.data() + position, range.out_at - position, progress);
    uint64_t held = held_by(kept, range.in_at, range.out_at, range.length);
    if (progress) progress->add(held);
    copy_and_check(input.fd(), file, output.checker(), range.in_at + held, range.out_at + held, range.length - held,
                   progress);
    position = range.out_end();
  }
  file.write_reporting(position, image.data() + position, image.size() - position, progress);
  output.checker().finish();
  file.commit();
}

}  // namespace machofix
