// Writing a rewritten Mach-O file (thin or universal) from its OutputImage.
//
// The output starts as an early copy of the input (core/io/copy_ahead.h), made while
// the rewrite runs by the plan the rewrite foresaw (MachORewrite::expected_placement:
// all of the file in place for a prune, an edit or a renewed signature, which may
// grow or shrink it at its end; each slice where a universal file's new layout puts
// it when a slice gains a signature). It is kept as far as it put the input's bytes
// where the image has them; over it go, in order, what changed (load commands,
// __LINKEDIT, the signature, a universal header), written from memory, and what the
// image borrows that the kept copy does not hold (a slice moved where the plan did
// not foresee), copied again where it now goes. Every copy is made in the kernel
// (copy_file_range, or shared blocks where the file system clones) and compared with
// the input behind it (CopyChecker). So a rewrite costs about a `cp` of the file, and
// its memory does not grow with the file's code and data.
#pragma once

#include "core/base/output_image.h"
#include "core/base/progress.h"
#include "core/io/copy_ahead.h"
#include "core/io/file_io.h"

namespace machofix {

// Writes `image`, the new file made from `input`, to `output` (made for `input`) and
// commits it. `progress` hears of every byte written or copied here.
// Throws an Error naming the offset when a copied range is not the input's bytes.
void write_macho_file(const MappedFile& input, const OutputImage& image, CopiedOutput& output, ProgressMeter* progress);

}  // namespace machofix
