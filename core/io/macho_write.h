// Writing a rewritten Mach-O file (thin or universal) from its OutputImage.
//
// What the OutputImage borrows from the input (the code and data of each slice, unchanged
// slices whole) is copied in the kernel (copy_file_range, or shared blocks where the
// file system clones) and compared with the input behind the copy (CopyChecker);
// only what changed (load commands, __LINKEDIT, the signature, a universal header) is
// written from memory. So a rewrite costs about a `cp` of the file, and its memory
// does not grow with the file's code and data.
#pragma once

#include <string>

#include "core/base/output_image.h"
#include "core/base/progress.h"
#include "core/io/file_io.h"

namespace machofix {

// Writes `image`, the new file made from `input`, to `target` through AtomicOutput
// (`durable`: as for AtomicOutput). `progress` hears of every byte written or copied.
// Throws an Error naming the offset when a copied range is not the input's bytes.
void write_macho_file(const MappedFile& input, const OutputImage& image, const std::string& target, bool durable,
                      ProgressMeter* progress);

}  // namespace machofix
