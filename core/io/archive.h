// Archives of models: .zip and .tar (plain, .gz, .xz, .zst), rewritten member by member
// through libarchive.
//
// Every regular-file member is streamed into a temporary file (never into memory) and
// handed to a fixer; members it rewrites go into the new archive with their new content
// and size, every other member is copied with its content and header unchanged: order,
// names, modes, owners, timestamps, link targets. The new archive keeps the input's
// format and compression and is written like any other output (AtomicOutput), only when
// a member changed, so a second run over a fixed archive writes nothing.
//
// The output is deterministic: the same input and fixer give the same bytes (the gzip
// header carries no timestamp). One exception: zip's DOS date/time fields are computed
// by libarchive in the local time zone, so a zip comes out the same only under the same
// TZ (the exact time, in the UT extra field, is UTC). The output is not byte-identical
// to the input even for unchanged members: libarchive re-encodes every header and
// recompresses with its default level.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/base/bytes.h"

namespace machofix {

// True for the archives rewrite_archive takes: a zip (also an empty one), a ustar/pax/GNU
// tar, or a gzip, xz or zstd stream whose content is such a tar. `head` is the start of
// the file (the whole file is fine: at most its first MiB is looked at). A compressed
// file that does not hold a tar is not an archive of models. No .pte/.ptd or Mach-O file
// starts with any of these signatures.
bool looks_like_archive(const Bytes& head);

struct ArchiveMember {
  std::string name;       // as stored; only ever a name, never a path anything is written to
  bool regular = false;   // a regular file with its own data (not a directory, link, hard link or device)
  uint64_t size = 0;      // of the content in the temporary file
};

// Called for each regular-file member with a temporary file holding its content (a
// generated name in a private directory). Returns true if it rewrote that file (same
// path) with new content, which then goes into the new archive. Throwing Error marks
// the member as failed: it is copied unchanged and the other members are still fixed;
// an Error marked as a refusal (Error::refusal()) refuses the whole archive instead.
using MemberFixer = std::function<bool(const ArchiveMember& member, const std::string& temp_path)>;

struct ArchiveOptions {
  bool dry_run = false;  // run the fixer, report, write nothing
  // Where the private temporary directory is made; empty: $TMPDIR, else /tmp. Members of
  // many gigabytes need it on a disk (not a tmpfs): the output's directory is a good choice.
  std::string temp_root;
  // The most bytes the temporary directory may hold at once: the member being fixed plus
  // the fixed members waiting to be written. 0: the free space of temp_root less 5%. A
  // member that would exceed it (a zip bomb, or a too-small disk) is not fixed: it is
  // recorded as failed and copied unchanged, streaming.
  uint64_t max_temp_bytes = 0;
  // A member that could not be read or fixed leaves the archive unwritten (Error naming
  // the first such member) instead of copied unchanged into a new one: a repair of
  // an archive is all of it or nothing. Dry runs still report every member.
  bool whole_or_nothing = false;
  // Flush the new archive and its rename to disk (see AtomicOutput): needed when it
  // replaces the input; a new file beside an untouched input (-o) can go without.
  bool durable = true;
  // How errors name the input; empty: by its path (which, for standard input, is the
  // name of a descriptor, not what the user typed).
  std::string input_name;
};

struct MemberFailure {
  std::string member;
  std::string error;
};

struct ArchiveResult {
  size_t members = 0;                  // every entry, directories and links included
  std::vector<std::string> changed;    // names of the members the fixer rewrote, in order
  std::vector<MemberFailure> failures; // members copied unchanged because fixing them failed
  bool written = false;                // the output was replaced
  uint64_t output_size = 0;            // when written
};

// Reads the archive `input`, fixes its members, and, if any changed and this is not a
// dry run, writes the new archive to `output` (which may be `input`) atomically with
// `mode`. Nothing is written when nothing changed: a caller that wants a copy at -o
// makes it. Throws Error, naming the archive and the member, when the archive is
// corrupt, unreadable or encrypted, or is not a zip or tar; the output is then untouched.
ArchiveResult rewrite_archive(const std::string& input, const std::string& output, mode_t mode,
                              const MemberFixer& fix, const ArchiveOptions& options = {});

}  // namespace machofix
