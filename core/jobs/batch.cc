#include "core/jobs/batch.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "core/io/file_io.h"

namespace machofix {

namespace fs = std::filesystem;

namespace {

struct Inode {
  dev_t device;
  ino_t number;
  bool operator<(const Inode& other) const {
    return device != other.device ? device < other.device : number < other.number;
  }
};

class Planner {
 public:
  Planner(const std::string& output, bool in_place, bool mirror) : output_(output), in_place_(in_place), mirror_(mirror) {}

  void add_input(const std::string& input, bool single) {
    if (is_standard_stream(input)) return add_standard_input();
    std::error_code error;
    fs::file_status status = fs::symlink_status(input, error);
    if (error == std::errc::no_such_file_or_directory) return walk_failure(input, "no such file or directory");
    if (error) return walk_failure(input, "cannot read: " + error.message());
    if (fs::is_directory(fs::status(input, error))) {
      std::string top = single ? "" : fs::path(input).lexically_normal().filename().string();
      if (top.empty() && !single) top = "root";
      plan_.directories.push_back(input);
      return add_tree(input, top, static_cast<int>(plan_.directories.size() - 1));
    }
    std::string mirrored = mirror_ ? (fs::path(output_) / fs::path(input).filename()).string() : output_;
    add_file({input, input, mirrored, {}, "", {}, /*named=*/true, mirror_, -1}, fs::is_symlink(status));
  }

  // A file of the tree `root`, as add_tree would have found it.
  void add_member(const std::string& root, const std::string& input) {
    fs::path relative = fs::path(input).lexically_normal().lexically_relative(fs::path(root).lexically_normal());
    if (relative.empty() || *relative.begin() == "..")
      return walk_failure(input, "is not inside --from-tree " + root, ErrorKind::Inapplicable);
    std::error_code error;
    fs::file_status status = fs::symlink_status(input, error);
    if (error == std::errc::no_such_file_or_directory) return walk_failure(input, "no such file or directory");
    if (error) return walk_failure(input, "cannot read: " + error.message());
    if (fs::is_directory(status))
      return walk_failure(input, "is a directory: --from-tree takes the files of the tree", ErrorKind::Inapplicable);
    std::string mirrored = mirror_ ? (fs::path(output_) / relative).lexically_normal().string() : "";
    add_file({input, input, mirrored, {}, "", {}, /*named=*/false, mirror_, -1}, fs::is_symlink(status));
  }

  BatchPlan finish() { return std::move(plan_); }
  void refuse(const std::string& path, const std::string& problem) { walk_failure(path, problem, ErrorKind::Inapplicable); }

 private:
  // "-": read once, written only to one named output file or standard output.
  void add_standard_input() {
    if (standard_input_seen_) return walk_failure(kStandardStream, "standard input can be read only once", ErrorKind::Inapplicable);
    standard_input_seen_ = true;
    if (in_place_) return walk_failure(kStandardStream, "standard input cannot be replaced in place: use -o FILE or -o -",
                          ErrorKind::Inapplicable);
    if (mirror_)
      return walk_failure(kStandardStream, "standard input has no name to give it in the output directory " + output_ +
                                               ": give it alone, with -o FILE or -o -",
                          ErrorKind::Inapplicable);
    plan_.items.push_back(BatchItem{kStandardStream, kStandardStream, output_, {}, "", {}, /*named=*/true, false, -1});
  }

  void add_tree(const std::string& root, const std::string& top, int directory) {
    std::vector<fs::path> entries;
    std::error_code error;
    for (fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, error), end;
         !error && it != end; it.increment(error))
      entries.push_back(it->path());
    if (error) walk_failure(root, "cannot walk the directory: " + error.message());
    std::sort(entries.begin(), entries.end());  // deterministic order, whatever readdir says
    // Real files first, so a file reached both directly and through a link is reported
    // under its own name.
    for (bool links : {false, true}) {
      for (const fs::path& entry : entries) {
        fs::file_status status = fs::symlink_status(entry, error);
        if (error || fs::is_directory(status) || fs::is_symlink(status) != links) continue;
        fs::path relative = entry.lexically_relative(root);
        std::string mirrored = mirror_ ? (fs::path(output_) / top / relative).lexically_normal().string() : "";
        add_file({entry.string(), entry.string(), mirrored, {}, "", {}, /*named=*/false, mirror_, directory}, links);
      }
    }
  }

  void add_file(BatchItem item, bool symlink) {
    const std::string path = item.input, shown = item.shown;
    if (symlink && mirror_ && !item.named) {
      // Inside a mirrored tree a link stays a link; its target is processed where it lies.
      std::error_code error;
      item.symlink_text = fs::read_symlink(path, error).string();
      item.notes.push_back("symlink: recreated in the output tree as the same link");
      plan_.items.push_back(std::move(item));
      return;
    }
    struct stat info;
    if (stat(path.c_str(), &info) != 0) return walk_failure(shown, "cannot read (dangling symlink?)");
    // Sockets, fifos, devices are no models: passed over in a tree, refused when named.
    if (!S_ISREG(info.st_mode)) return item.named ? walk_failure(shown, "not a regular file", ErrorKind::Malformed) : void();
    if (symlink) {
      std::error_code error;
      item.input = fs::canonical(path, error).string();
      item.notes.push_back("symlink to " + item.input + ": the target is processed" +
                           std::string(in_place_ ? "; the link stays a link" : ""));
    }
    item.size = static_cast<uint64_t>(info.st_size);
    Inode inode{info.st_dev, info.st_ino};
    auto first = first_name_.find(inode);
    if (first != first_name_.end()) {
      BatchItem& owner = plan_.items[first->second];
      if (symlink || owner.input == item.input) {
        owner.notes.push_back(shown + " names the same file (" + std::string(symlink ? "symlink" : "path") + "): processed once");
        return;
      }
      owner.same_inode.push_back(in_place_ ? path : item.output);
      owner.notes.push_back("hard link " + shown + " is re-linked to the repaired file");
      return;
    }
    if (info.st_nlink > 1)
      item.notes.push_back("has " + std::to_string(info.st_nlink) +
                           " hard links; names among the inputs are re-linked to the repaired file, others keep the original");
    first_name_[inode] = plan_.items.size();
    plan_.items.push_back(std::move(item));
  }

  void walk_failure(const std::string& path, const std::string& problem, ErrorKind kind = ErrorKind::System) {
    FileReport report;
    report.path = path;
    report.status = FileStatus::Failed;
    report.error_kind = kind;
    report.error = path + ": " + problem;
    plan_.preliminary.push_back(std::move(report));
  }

  std::string output_;
  bool in_place_;
  bool mirror_;
  BatchPlan plan_;
  std::map<Inode, size_t> first_name_;
  bool standard_input_seen_ = false;
};

// Gives every other name of a rewritten file the new inode: link beside, then rename.
void relink(const std::string& repaired, const std::string& name, FileReport& report) {
  std::string temporary = name + ".machofix-link-" + std::to_string(getpid());
  ::unlink(temporary.c_str());
  std::error_code error;
  fs::create_directories(fs::path(name).parent_path(), error);
  if (::link(repaired.c_str(), temporary.c_str()) != 0 || ::rename(temporary.c_str(), name.c_str()) != 0) {
    ::unlink(temporary.c_str());
    report.notes.push_back("could not re-link hard link " + name + "; it keeps the original");
  }
}

// Turns one job's progress (done of total units of its own) into bytes of the
// item's size, passed on as they grow; what is left is passed on when it ends.
class ItemBytes {
 public:
  ItemBytes(uint64_t size, const std::function<void(uint64_t)>& bytes_done) : size_(size), bytes_done_(bytes_done) {}

  ByteProgress callback() {
    return [this](uint64_t done, uint64_t total) {
      if (total) advance(static_cast<uint64_t>(static_cast<long double>(size_) * std::min(done, total) / total));
    };
  }
  void finish() { advance(size_); }

 private:
  void advance(uint64_t to) {
    uint64_t before = passed_.load();
    while (before < to && !passed_.compare_exchange_weak(before, to)) {
    }
    if (before < to && bytes_done_) bytes_done_(to - before);
  }

  uint64_t size_;
  const std::function<void(uint64_t)>& bytes_done_;
  std::atomic<uint64_t> passed_{0};
};

FileReport recreate_symlink(const BatchItem& item, bool dry_run) {
  FileReport report;
  report.path = item.shown;
  report.status = FileStatus::Skipped;
  report.notes = item.notes;
  if (dry_run || item.output.empty()) return report;
  std::error_code error;
  fs::create_directories(fs::path(item.output).parent_path(), error);
  fs::remove(item.output, error);
  fs::create_symlink(item.symlink_text, item.output, error);
  if (error) {
    report.status = FileStatus::Failed;
    report.error_kind = ErrorKind::System;
    report.error = item.shown + ": cannot recreate the symlink at " + item.output + ": " + error.message();
  }
  return report;
}

FileReport run_item(const BatchItem& item, Operation operation, const JobOptions& options, const JobRunner& runner) {
  if (!item.symlink_text.empty()) return recreate_symlink(item, options.dry_run);
  JobOptions job = options;
  job.output = item.output;
  job.skip_other_files = !item.named;
  job.create_output_directories = item.mirrored;
  FileReport report = runner ? runner(item.input, operation, job) : run_job(item.input, operation, job);
  report.path = item.shown;
  report.notes.insert(report.notes.begin(), item.notes.begin(), item.notes.end());
  bool rewritten = report.status == FileStatus::Changed || (!item.output.empty() && report.bytes_written);
  if (rewritten && !options.dry_run) {
    std::string repaired = item.output.empty() ? item.input : item.output;
    for (const std::string& name : item.same_inode) relink(repaired, name, report);
  }
  return report;
}

// A report of a file that is a model (or holds one), whatever happened to it.
bool is_model(const FileReport& report) {
  if (report.status == FileStatus::Skipped) return false;
  return report.kind != FileKind::Archive || !report.members.empty() || report.status == FileStatus::Failed;
}

bool is_directory(const std::string& path) {
  std::error_code error;
  return fs::is_directory(path, error);
}

}  // namespace

uint64_t BatchPlan::total_size() const {
  uint64_t total = 0;
  for (const BatchItem& item : items) total += item.size;
  return total;
}

BatchPlan plan_batch(const std::vector<std::string>& inputs, const std::string& output, bool in_place,
                     const std::string& tree) {
  if (!tree.empty()) {
    bool to_stdout = is_standard_stream(output);
    Planner planner(output, in_place, !output.empty() && !to_stdout);
    if (to_stdout) planner.refuse("-o -", "standard output takes one file, not the files of --from-tree " + tree);
    else
      for (const std::string& input : inputs) planner.add_member(tree, input);
    return planner.finish();
  }
  bool single_file = inputs.size() == 1 && (is_standard_stream(inputs.front()) || !is_directory(inputs.front()));
  if (is_standard_stream(output) && !single_file) {
    Planner refusal(output, in_place, false);
    refusal.refuse("-o -", "standard output takes one file: give one input file, not " +
                               std::string(inputs.size() > 1 ? "several" : "a directory"));
    return refusal.finish();
  }
  // -o names the output file for one input file, unless it is an existing directory.
  bool mirror = !output.empty() && !is_standard_stream(output) && (!single_file || is_directory(output));
  Planner planner(output, in_place, mirror);
  for (const std::string& input : inputs) planner.add_input(input, inputs.size() == 1);
  return planner.finish();
}

std::vector<FileReport> run_batch(const BatchPlan& plan, Operation operation, const JobOptions& options, unsigned jobs,
                                  const BatchProgress& progress, const JobRunner& runner) {
  std::vector<FileReport> reports(plan.items.size());
  std::atomic<size_t> next{0};
  size_t done = 0;
  std::mutex progress_mutex;
  auto worker = [&] {
    for (size_t index = next++; index < plan.items.size(); index = next++) {
      if (progress.file_started) progress.file_started(plan.items[index]);
      ItemBytes bytes(plan.items[index].size, progress.bytes_done);
      JobOptions job = options;
      if (progress.bytes_done) job.repair.progress = bytes.callback();
      reports[index] = run_item(plan.items[index], operation, job, runner);
      bytes.finish();
      std::lock_guard<std::mutex> lock(progress_mutex);
      ++done;
      if (progress.file_done) progress.file_done(done, plan.items.size(), reports[index]);
    }
  };
  // This thread is a worker too; no more workers than files.
  size_t workers = std::min<size_t>(std::max(1u, jobs), plan.items.size());
  std::vector<std::thread> threads;
  for (size_t i = 1; i < workers; ++i) threads.emplace_back(worker);
  worker();
  for (std::thread& thread : threads) thread.join();
  reports.insert(reports.begin(), plan.preliminary.begin(), plan.preliminary.end());
  return reports;
}

// The summary's count a file of this status adds to.
static size_t& count_of(BatchSummary& summary, FileStatus status) {
  switch (status) {
    case FileStatus::Changed:
    case FileStatus::WouldChange: return summary.changed;
    case FileStatus::Unchanged:
    case FileStatus::Inspected: return summary.unchanged;
    case FileStatus::Skipped: return summary.skipped;
    case FileStatus::Failed: return summary.failed;
  }
  return summary.failed;
}

BatchSummary summarize(const std::vector<FileReport>& reports) {
  BatchSummary summary;
  for (const FileReport& report : reports) {
    ++summary.seen;
    ++count_of(summary, report.status);
    for (const FileReport& member : report.members) summary.failed += member.status == FileStatus::Failed;
    summary.dylibs_removed += report.removed_count();
    summary.dylibs_removable += report.removable_count();
    summary.bytes_written += report.bytes_written;
  }
  return summary;
}

std::vector<InputWithoutModels> inputs_without_models(const BatchPlan& plan, const std::vector<FileReport>& reports) {
  std::vector<bool> has_model(plan.directories.size(), false);
  std::vector<InputWithoutModels> empty;
  // run_batch puts the walk's own reports first, then one report per item.
  size_t first = reports.size() - plan.items.size();
  for (size_t i = 0; i < plan.items.size(); ++i) {
    const BatchItem& item = plan.items[i];
    const FileReport& report = reports[first + i];
    if (item.directory >= 0) has_model[item.directory] = has_model[item.directory] || is_model(report);
    if (item.named && report.kind == FileKind::Archive && !is_model(report)) empty.push_back({item.shown, false});
  }
  for (size_t d = 0; d < plan.directories.size(); ++d) {
    auto walked = [&](const FileReport& failure) { return failure.path == plan.directories[d]; };
    bool unwalkable = std::any_of(plan.preliminary.begin(), plan.preliminary.end(), walked);  // already an error
    if (!has_model[d] && !unwalkable) empty.push_back({plan.directories[d], true});
  }
  return empty;
}

}  // namespace machofix
