#include "core/io/macho_write.h"

#include "core/io/copy_check.h"

namespace machofix {

void write_macho_file(const MappedFile& input, const OutputImage& image, const std::string& target, bool durable,
                      ProgressMeter* progress) {
  AtomicOutput output(target, input.mode(), durable);
  output.truncate(image.size());
  CopyChecker checker(input, output.temp_path(), image.size());
  uint64_t position = 0;
  for (const OutputImage::Borrowed& range : image.borrowed()) {
    if (range.fd != input.fd()) fail("internal error: the output borrows from another file than its input");
    output.write_reporting(position, image.data() + position, range.from - position, progress);
    copy_and_check(input.fd(), output, checker, range.file_offset, range.from, range.size(), progress);
    position = range.to;
  }
  output.write_reporting(position, image.data() + position, image.size() - position, progress);
  checker.finish();
  output.commit();
}

}  // namespace machofix
