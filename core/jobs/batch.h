// Many inputs at once: files and directory trees, in parallel, each file on its own.
//
// plan_batch() expands the inputs into one item per file (directories recursively,
// in sorted order so reports and outputs are deterministic); run_batch() runs
// run_job() on them on N threads. One failing file never stops the others.
//
// Links: a symlink is followed and its target processed once (in place, the link
// stays a link). Hard links: the first name of an inode is processed; when it was
// rewritten, every other name of that inode among the inputs is re-linked to the
// new file, so the names stay one file and all see the repair. Names outside the
// inputs cannot be found and keep the original: the report says so.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/jobs/job.h"

namespace machofix {

struct BatchItem {
  std::string input;   // the path to read (a symlink's target when in place)
  std::string shown;   // the path as the user named it (or as found in the tree)
  std::string output;  // with -o: where the result goes; empty: in place or no output
  std::vector<std::string> same_inode;  // hard-link names sharing this file, re-linked after it
  std::string symlink_text;  // a link inside a mirrored tree: recreated as is, not processed
  std::vector<std::string> notes;
  // Named on the command line: a file that is not a model is an error. Found in a
  // directory: it is skipped (and, in a mirrored tree, copied as it is).
  bool named = false;
  bool mirrored = false;  // `output` lies in a mirrored tree, whose directories are made
  int directory = -1;     // found under this BatchPlan::directories entry
  uint64_t size = 0;      // of the file to read, for progress
};

struct BatchPlan {
  std::vector<BatchItem> items;
  std::vector<FileReport> preliminary;  // what the walk itself decided (links left alone, unreadable dirs)
  std::vector<std::string> directories;  // the inputs that are directories
  uint64_t total_size() const;           // of the items' files
};

// `output` is -o: with one plain file as input it is the output file (or, if it is an
// existing directory, the directory that receives it); otherwise a directory that
// mirrors the inputs: one directory input's contents go right under it, several
// inputs each get a subdirectory (or file) named after them.
//
// `tree` (--from-tree DIR), when not empty: the inputs are files found in the tree DIR,
// each planned as a run over DIR alone plans it (a file that is no model is skipped,
// and with -o copied; -o mirrors DIR; a link in a mirrored tree is recreated), so that
// runs over parts of a tree (a distributed run's tasks: python/machofix/dask.py) add
// up to the run over the whole. An input outside DIR, or a directory, is refused.
BatchPlan plan_batch(const std::vector<std::string>& inputs, const std::string& output, bool in_place,
                     const std::string& tree = "");

// What run_batch tells a front end as it goes, from its worker threads.
struct BatchProgress {
  std::function<void(const BatchItem& item)> file_started;  // from the worker that takes it
  // A file is done: called under a lock, one file at a time.
  std::function<void(size_t done, size_t total, const FileReport& latest)> file_done;
  // So many more bytes of the items' sizes (BatchItem::size) are done: called from
  // any thread, also while a large file is being processed.
  std::function<void(uint64_t bytes)> bytes_done;
};

// What runs one file: run_job, unless the caller gives another (`fix`: core/jobs/fix.h).
using JobRunner = std::function<FileReport(const std::string& path, Operation operation, const JobOptions& options)>;

std::vector<FileReport> run_batch(const BatchPlan& plan, Operation operation, const JobOptions& options, unsigned jobs,
                                  const BatchProgress& progress = {}, const JobRunner& runner = {});

struct BatchSummary {
  size_t seen = 0, changed = 0, unchanged = 0, skipped = 0, failed = 0;
  size_t dylibs_removed = 0;    // from the files written
  size_t dylibs_removable = 0;  // what prune removes (or removed)
  uint64_t bytes_written = 0;
};
BatchSummary summarize(const std::vector<FileReport>& reports);

// Inputs that held no model: a directory under which no file is one, or an archive
// named on the command line none of whose members is one. `reports` is what
// run_batch returned for `plan`.
struct InputWithoutModels {
  std::string path;
  bool directory = false;  // else an archive
};
std::vector<InputWithoutModels> inputs_without_models(const BatchPlan& plan, const std::vector<FileReport>& reports);

}  // namespace machofix
