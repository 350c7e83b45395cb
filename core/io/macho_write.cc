#include "core/io/macho_write.h"

#include <algorithm>

#include "core/io/copy_check.h"

namespace machofix {

namespace {

constexpr uint64_t kPart = 8ull << 20;  // a progress report at most this far apart

void write_memory(AtomicOutput& output, const OutputImage& image, uint64_t from, uint64_t to, ProgressMeter* progress) {
  for (uint64_t at = from; at < to; at += kPart) {
    uint64_t length = std::min(kPart, to - at);
    output.write_at(at, image.data() + at, length);
    if (progress) progress->add(length);
  }
}

}  // namespace

void write_macho_file(const MappedFile& input, const OutputImage& image, const std::string& target, bool durable,
                      ProgressMeter* progress) {
  AtomicOutput output(target, input.mode(), durable);
  output.truncate(image.size());
  CopyChecker checker(input, output.temp_path(), image.size());
  uint64_t position = 0;
  for (const OutputImage::Borrowed& range : image.borrowed()) {
    if (range.fd != input.fd()) fail("internal error: the output borrows from another file than its input");
    write_memory(output, image, position, range.from, progress);
    copy_and_check(input.fd(), output, checker, range.file_offset, range.from, range.size(), progress);
    position = range.to;
  }
  write_memory(output, image, position, image.size(), progress);
  checker.finish();
  output.commit();
}

}  // namespace machofix
