// The words the reports (text, JSON schema 1, the Python package) use for core's
// typed results: one function per enum, each a switch without a default, so that a
// new value without its text does not compile (-Werror=switch).
#pragma once

#include "core/jobs/job.h"

namespace machofix::cli {

const char* to_text(FileKind kind);             // "mach-o", "mach-o universal", "pte", ...
const char* to_text(FileStatus status);         // "changed", "would change", ...
const char* to_text(ErrorKind kind);            // "malformed", "refused", ..., "proof-failed"
const char* to_text(SignatureStatus status);    // "unsigned", "valid", ..., "replaced (ad hoc)"
const char* to_text(DylibKind kind);            // "load", "weak", "reexport", "upward"
const char* to_text(ContainerKind kind);        // "pte", "ptd"
const char* to_text(BlobKind kind);             // as FileKind's
const char* to_text(EditKind kind);             // the option's name: "delete-rpath", ...
const char* to_text(EditStatus status);         // "applied", "already", "no match"
const char* to_text(LeftAsIs reason);           // why a slice is left unchanged; "" for No
std::string to_text(const DylibDecision& decision);  // "supplies 2 symbols", "kept by --keep 'x'", ...
// Why a file found in a directory was passed over: "a Mach-O object file (MH_OBJECT),
// not a dylib, bundle or executable".
std::string skipped_because(uint32_t filetype);

}  // namespace machofix::cli
