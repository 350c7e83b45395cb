// Archives of models: every format is built here with libarchive's own writer, rewritten
// with a stand-in fixer, and read back member by member.
#include <archive.h>
#include <archive_entry.h>
#include <doctest/doctest.h>
#include <locale.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/io/archive.h"
#include "core/io/file_io.h"
#include "tests/support/whole_file.h"

#if defined(__APPLE__)
#include <xlocale.h>
#endif

using namespace machofix;
namespace fs = std::filesystem;

namespace {

// A scratch directory per test, removed afterwards; members' temporary files go to its
// "tmp", which every test checks is empty again.
class Scratch {
 public:
  Scratch() {
    std::string pattern = (fs::temp_directory_path() / "machofix-test-archive-XXXXXX").string();
    std::vector<char> name(pattern.begin(), pattern.end());
    name.push_back('\0');
    REQUIRE(mkdtemp(name.data()) != nullptr);
    root_ = name.data();
    fs::create_directory(tmp());
  }
  ~Scratch() { fs::remove_all(root_); }
  std::string path(const std::string& name) const { return root_ + "/" + name; }
  std::string tmp() const { return root_ + "/tmp"; }
  bool tmp_is_empty() const { return fs::is_empty(tmp()); }
  ArchiveOptions options() const {
    ArchiveOptions options;
    options.temp_root = tmp();
    return options;
  }

 private:
  std::string root_;
};

std::string read_file(const std::string& path) { return test::whole_file(path); }

void write_file(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
}

ino_t inode_of(const std::string& path) {
  struct stat info;
  REQUIRE(stat(path.c_str(), &info) == 0);
  return info.st_ino;
}

// The test's own libarchive calls run in a UTF-8 locale, as tar and bsdtar do (they call
// setlocale): in the C locale libarchive warns about every non-ASCII name.
class Utf8 {
 public:
  Utf8() {
    for (const char* name : {"C.UTF-8", "C.utf8", "UTF-8", "en_US.UTF-8"})
      if ((utf8_ = newlocale(LC_CTYPE_MASK, name, locale_t(0)))) break;
    REQUIRE(utf8_ != locale_t(0));
    previous_ = uselocale(utf8_);
  }
  ~Utf8() {
    uselocale(previous_);
    freelocale(utf8_);
  }

 private:
  locale_t utf8_ = locale_t(0);
  locale_t previous_ = locale_t(0);
};

struct Member {
  std::string name;
  std::string content;
  unsigned type = AE_IFREG;
  unsigned perm = 0644;
  time_t mtime = 1700000000;
  long nsec = 0;
  std::string link;      // a symlink's target
  std::string hardlink;  // the member a hard link shares its data with
  bool stored = false;   // zip: stored rather than deflated
};

Member file(const std::string& name, const std::string& content, unsigned perm = 0644) {
  Member member;
  member.name = name;
  member.content = content;
  member.perm = perm;
  return member;
}

Member stored(Member member) {
  member.stored = true;
  return member;
}

Member dated(Member member, time_t mtime, long nsec = 0) {
  member.mtime = mtime;
  member.nsec = nsec;
  return member;
}

Member hardlink_to(const std::string& name, const std::string& target) {
  Member member = file(name, "");
  member.hardlink = target;
  return member;
}

Member directory(const std::string& name) {
  Member member = file(name, "", 0755);
  member.type = AE_IFDIR;
  return member;
}

Member symlink_to(const std::string& name, const std::string& target) {
  Member member = file(name, "", 0777);
  member.type = AE_IFLNK;
  member.link = target;
  return member;
}

struct Kind {
  std::string label;
  int format;
  int filter;
};

bool can_write_zstd() {
  archive* probe = archive_write_new();
  bool ok = archive_write_add_filter_zstd(probe) == ARCHIVE_OK;
  archive_write_free(probe);
  return ok;
}

// By name, not archive_write_set_format(code): its table brings xar's writer and
// with it libxml2, left out of the static link (top CMakeLists.txt).
int set_format(archive* writer, int format) {
  switch (format) {
    case ARCHIVE_FORMAT_ZIP: return archive_write_set_format_zip(writer);
    case ARCHIVE_FORMAT_TAR_USTAR: return archive_write_set_format_ustar(writer);
    case ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE: return archive_write_set_format_pax(writer);
    case ARCHIVE_FORMAT_TAR_GNUTAR: return archive_write_set_format_gnutar(writer);
    case ARCHIVE_FORMAT_RAW: return archive_write_set_format_raw(writer);
  }
  return ARCHIVE_FATAL;
}

void build_archive(const std::string& path, const Kind& kind, const std::vector<Member>& members) {
  Utf8 names_in_utf8;
  archive* writer = archive_write_new();
  REQUIRE(set_format(writer, kind.format) == ARCHIVE_OK);
  if (kind.filter != ARCHIVE_FILTER_NONE) REQUIRE(archive_write_add_filter(writer, kind.filter) == ARCHIVE_OK);
  REQUIRE(archive_write_open_filename(writer, path.c_str()) == ARCHIVE_OK);
  for (const Member& member : members) {
    archive_entry* entry = archive_entry_new();
    archive_entry_set_pathname(entry, member.name.c_str());
    archive_entry_set_filetype(entry, member.type);
    archive_entry_set_perm(entry, member.perm);
    archive_entry_set_mtime(entry, member.mtime, member.nsec);
    archive_entry_set_uid(entry, 501);
    archive_entry_set_gid(entry, 20);
    archive_entry_set_uname(entry, "builder");
    archive_entry_set_gname(entry, "staff");
    if (member.type == AE_IFLNK) archive_entry_set_symlink(entry, member.link.c_str());
    if (!member.hardlink.empty()) archive_entry_set_hardlink(entry, member.hardlink.c_str());
    archive_entry_set_size(entry, member.type == AE_IFREG ? member.content.size() : 0);
    if (kind.format == ARCHIVE_FORMAT_ZIP)
      member.stored ? archive_write_zip_set_compression_store(writer) : archive_write_zip_set_compression_deflate(writer);
    REQUIRE(archive_write_header(writer, entry) == ARCHIVE_OK);
    if (!member.content.empty())
      REQUIRE(archive_write_data(writer, member.content.data(), member.content.size()) == (la_ssize_t)member.content.size());
    archive_entry_free(entry);
  }
  REQUIRE(archive_write_close(writer) == ARCHIVE_OK);
  archive_write_free(writer);
}

// What a reader sees of one member.
struct Seen {
  std::string name;
  unsigned type = 0, perm = 0;
  int64_t uid = 0, gid = 0;
  std::string uname, gname;
  time_t mtime = 0;
  long nsec = 0;
  std::string link, hardlink, content, method;

  bool operator==(const Seen&) const = default;
};

std::string or_empty(const char* text) { return text ? text : ""; }

std::vector<Seen> read_archive(const std::string& path) {
  Utf8 names_in_utf8;
  archive* reader = archive_read_new();
  archive_read_support_filter_all(reader);
  // Every format machofix writes; not _all, which brings xar's reader and with it
  // libxml2, left out of the static link (top CMakeLists.txt).
  archive_read_support_format_tar(reader);
  archive_read_support_format_zip(reader);
  REQUIRE(archive_read_open_filename(reader, path.c_str(), 10240) == ARCHIVE_OK);
  std::vector<Seen> seen;
  archive_entry* entry;
  while (archive_read_next_header(reader, &entry) == ARCHIVE_OK) {
    Seen member{archive_entry_pathname(entry), archive_entry_filetype(entry), archive_entry_perm(entry),
                archive_entry_uid(entry), archive_entry_gid(entry), or_empty(archive_entry_uname(entry)),
                or_empty(archive_entry_gname(entry)), archive_entry_mtime(entry), archive_entry_mtime_nsec(entry),
                or_empty(archive_entry_symlink(entry)), or_empty(archive_entry_hardlink(entry)), "",
                or_empty(archive_format_name(reader))};
    char buffer[65536];
    la_ssize_t got;
    while ((got = archive_read_data(reader, buffer, sizeof buffer)) > 0) member.content.append(buffer, got);
    REQUIRE(got == 0);
    seen.push_back(member);
  }
  archive_read_free(reader);
  return seen;
}

// The stand-in for a model repair: content starting "FIXME" becomes "FIXED", "FIXME+"
// also grows; "BROKEN" cannot be fixed.
bool fake_fix(const ArchiveMember& member, const std::string& temp_path) {
  REQUIRE(member.regular);
  std::string content = read_file(temp_path);
  REQUIRE(content.size() == member.size);
  if (content.rfind("BROKEN", 0) == 0) throw Error("cannot fix this one", 8);
  if (content.rfind("FIXME", 0) != 0) return false;
  content.replace(0, 5, "FIXED");
  if (content.size() > 5 && content[5] == '+') content += " and grown";
  write_file_atomically(temp_path, std::vector<uint8_t>(content.begin(), content.end()), 0600);
  return true;
}

std::string fixed(std::string content) {
  content.replace(0, 5, "FIXED");
  if (content[5] == '+') content += " and grown";
  return content;
}

// A zip has no hard links: only tars get one.
std::vector<Member> sample_members(bool with_hardlink = false) {
  std::string big(3 << 20, '\0');  // three read chunks
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 % 251);
  std::vector<Member> members = {
      directory("models/"),
      dated(file("models/a.pte", "FIXME: same length"), 1700000001, 123456789),
      stored(dated(file("models/b.pte", "FIXME+ grows", 0600), 1700000002)),
      stored(dated(file("README.txt", "plain text, copied as it is", 0444), 1600000000)),
      file("models/big.bin", big, 0640),
      dated(symlink_to("latest.pte", "models/a.pte"), 1700000003),
      file("../outside.pte", "FIXME: a hostile name"),
      file("empty", ""),
      file("models/mod\xc3\xa8le-\xc3\xbc.pte", "FIXME: a UTF-8 name"),
      file("/absolute.pte", "FIXME: an absolute name"),
  };
  if (with_hardlink) members.push_back(hardlink_to("models/same.pte", "models/a.pte"));
  return members;
}

// The members the stand-in fixer must be called for, and those it changes.
std::vector<std::string> names_to_fix(const std::vector<Member>& members, bool only_changed) {
  std::vector<std::string> names;
  for (const Member& member : members)
    if (member.type == AE_IFREG && member.hardlink.empty() && (!only_changed || member.content.rfind("FIXME", 0) == 0))
      names.push_back(member.name);
  return names;
}

// What the rewritten archive must read as: the input as read, with fixed contents.
std::vector<Seen> expected_after_fix(std::vector<Seen> input) {
  for (Seen& member : input)
    if (member.type == AE_IFREG && member.content.rfind("FIXME", 0) == 0) member.content = fixed(member.content);
  return input;
}

std::vector<Kind> all_kinds() {
  std::vector<Kind> kinds = {
      {"zip", ARCHIVE_FORMAT_ZIP, ARCHIVE_FILTER_NONE},
      {"ustar", ARCHIVE_FORMAT_TAR_USTAR, ARCHIVE_FILTER_NONE},
      {"pax", ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE, ARCHIVE_FILTER_NONE},
      {"gnutar", ARCHIVE_FORMAT_TAR_GNUTAR, ARCHIVE_FILTER_NONE},
      {"pax.gz", ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE, ARCHIVE_FILTER_GZIP},
      {"gnutar.gz", ARCHIVE_FORMAT_TAR_GNUTAR, ARCHIVE_FILTER_GZIP},
      {"ustar.xz", ARCHIVE_FORMAT_TAR_USTAR, ARCHIVE_FILTER_XZ},
  };
  if (can_write_zstd())
    kinds.push_back({"pax.zst", ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE, ARCHIVE_FILTER_ZSTD});
  else
    MESSAGE("libarchive cannot write zstd here: .tar.zst not tested");
  return kinds;
}

// The error message of running f, or "" if it did not throw Error.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& error) {
    return error.describe();
  }
  return "";
}

Bytes bytes_of(const std::string& content) {
  return Bytes(reinterpret_cast<const uint8_t*>(content.data()), content.size());
}

}  // namespace

TEST_CASE("every format: models fixed, everything else kept, deterministic, a second run writes nothing") {
  for (const Kind& kind : all_kinds()) {
    CAPTURE(kind.label);
    Scratch scratch;
    std::string input = scratch.path("in." + kind.label);
    std::vector<Member> members = sample_members(kind.format != ARCHIVE_FORMAT_ZIP);
    build_archive(input, kind, members);
    std::string original = read_file(input);
    REQUIRE(looks_like_archive(bytes_of(original)));

    std::vector<std::string> names_seen, temp_paths;
    MemberFixer fixer = [&](const ArchiveMember& member, const std::string& temp_path) {
      names_seen.push_back(member.name);
      temp_paths.push_back(temp_path);
      return fake_fix(member, temp_path);
    };
    std::string first = scratch.path("first"), second = scratch.path("second");
    ArchiveResult result = rewrite_archive(input, first, 0640, fixer, scratch.options());
    CHECK(result.written);
    CHECK(result.members == members.size());
    CHECK(result.changed == names_to_fix(members, true));
    CHECK(result.failures.empty());
    CHECK(names_seen == names_to_fix(members, false));  // not the directory, the symlink, the hard link
    for (const std::string& path : temp_paths) CHECK(path.rfind(scratch.tmp() + "/machofix-archive-", 0) == 0);
    CHECK_FALSE(fs::exists(scratch.path("../outside.pte")));

    std::vector<Seen> after = read_archive(first);
    std::vector<Seen> expected = expected_after_fix(read_archive(input));
    REQUIRE(after.size() == expected.size());
    for (size_t i = 0; i < after.size(); ++i) {
      CAPTURE(expected[i].name);
      CHECK(after[i] == expected[i]);  // name, order, type, mode, owner, mtime (ns), link, content, zip method
    }
    if (kind.format == ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE) CHECK(after[1].nsec == 123456789);
    if (kind.format == ARCHIVE_FORMAT_ZIP) {
      CHECK(after[2].method.find("uncompressed") != std::string::npos);  // stored stays stored
      CHECK(after[1].method.find("deflation") != std::string::npos);
    }
    if (kind.format != ARCHIVE_FORMAT_ZIP) CHECK(after.back().hardlink == "models/a.pte");
    if (kind.filter == ARCHIVE_FILTER_GZIP) CHECK(read_file(first).substr(4, 4) == std::string(4, '\0'));
    if (kind.filter == ARCHIVE_FILTER_NONE) CHECK(read_file(first).find("hdrcharset") == std::string::npos);
    struct stat info;
    REQUIRE(stat(first.c_str(), &info) == 0);
    CHECK((info.st_mode & 07777) == 0640);

    rewrite_archive(input, second, 0640, fake_fix, scratch.options());
    CHECK(read_file(first) == read_file(second));  // deterministic
    CHECK(read_file(input) == original);           // the input is only read

    ino_t before = inode_of(first);
    std::string fixed_bytes = read_file(first);
    ArchiveResult again = rewrite_archive(first, first, 0640, fake_fix, scratch.options());
    CHECK_FALSE(again.written);
    CHECK(again.changed.empty());
    CHECK(inode_of(first) == before);
    CHECK(read_file(first) == fixed_bytes);
    CHECK(scratch.tmp_is_empty());
  }
}

TEST_CASE("in place: the archive is replaced by a new file") {
  Scratch scratch;
  std::string path = scratch.path("models.tar.gz");
  build_archive(path, {"pax.gz", ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE, ARCHIVE_FILTER_GZIP}, sample_members());
  ino_t before = inode_of(path);
  ArchiveResult result = rewrite_archive(path, path, 0644, fake_fix, scratch.options());
  CHECK(result.written);
  CHECK(inode_of(path) != before);
  CHECK(read_archive(path)[1].content == "FIXED: same length");
  for (const auto& file : fs::directory_iterator(scratch.path("")))
    CHECK(file.path().filename().string().find("machofix") == std::string::npos);  // no temporaries beside it
}

TEST_CASE("a member that fails to fix is copied unchanged and the others are still fixed") {
  Scratch scratch;
  std::string input = scratch.path("in.zip"), output = scratch.path("out.zip");
  build_archive(input, {"zip", ARCHIVE_FORMAT_ZIP, ARCHIVE_FILTER_NONE},
                {file("a.pte", "FIXME a"), file("broken.pte", "BROKEN beyond repair"), file("c.pte", "FIXME+ c")});
  ArchiveResult result = rewrite_archive(input, output, 0644, fake_fix, scratch.options());
  CHECK(result.written);
  CHECK(result.changed == std::vector<std::string>{"a.pte", "c.pte"});
  REQUIRE(result.failures.size() == 1);
  CHECK(result.failures[0].member == "broken.pte");
  CHECK(result.failures[0].error == "offset 0x8: cannot fix this one");
  std::vector<Seen> after = read_archive(output);
  REQUIRE(after.size() == 3);
  CHECK(after[0].content == "FIXED a");
  CHECK(after[1].content == "BROKEN beyond repair");
  CHECK(after[2].content == "FIXED+ c and grown");
  CHECK(scratch.tmp_is_empty());
}

TEST_CASE("dry run: the fixer runs, nothing is written") {
  Scratch scratch;
  std::string input = scratch.path("in.tar");
  build_archive(input, {"ustar", ARCHIVE_FORMAT_TAR_USTAR, ARCHIVE_FILTER_NONE}, sample_members());
  ArchiveOptions options = scratch.options();
  options.dry_run = true;
  ArchiveResult result = rewrite_archive(input, scratch.path("out.tar"), 0644, fake_fix, options);
  CHECK(result.changed == names_to_fix(sample_members(), true));
  CHECK_FALSE(result.written);
  CHECK_FALSE(fs::exists(scratch.path("out.tar")));
  CHECK(scratch.tmp_is_empty());
}

TEST_CASE("a member larger than the temporary budget is not fixed but copied, streaming") {
  Scratch scratch;
  std::string input = scratch.path("in.tar.xz"), output = scratch.path("out.tar.xz");
  std::string huge = "FIXME" + std::string(2 << 20, 'x');
  build_archive(input, {"ustar.xz", ARCHIVE_FORMAT_TAR_USTAR, ARCHIVE_FILTER_XZ},
                {file("huge.pte", huge), file("small.pte", "FIXME small")});
  ArchiveOptions options = scratch.options();
  options.max_temp_bytes = 1 << 20;
  ArchiveResult result = rewrite_archive(input, output, 0644, fake_fix, options);
  CHECK(result.changed == std::vector<std::string>{"small.pte"});
  REQUIRE(result.failures.size() == 1);
  CHECK(result.failures[0].member == "huge.pte");
  std::vector<Seen> after = read_archive(output);
  CHECK(after[0].content == huge);
  CHECK(after[1].content == "FIXED small");
  CHECK(scratch.tmp_is_empty());
}

TEST_CASE("a damaged archive is an error naming it and the member; nothing is written") {
  Scratch scratch;
  SUBCASE("truncated .tar.gz") {
    std::string input = scratch.path("cut.tar.gz"), output = scratch.path("out.tar.gz");
    build_archive(input, {"pax.gz", ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE, ARCHIVE_FILTER_GZIP}, sample_members());
    std::string whole = read_file(input);
    write_file(input, whole.substr(0, whole.size() / 2));
    std::string cut = read_file(input);
    std::string message = error_of([&] { rewrite_archive(input, output, 0644, fake_fix, scratch.options()); });
    MESSAGE(message);
    CHECK(message.rfind(input + ": ", 0) == 0);
    CHECK(message.find("models/big.bin") != std::string::npos);  // the member the data ends in
    CHECK_FALSE(fs::exists(output));
    CHECK(read_file(input) == cut);
  }
  SUBCASE("a zip member whose data does not match its CRC") {
    std::string input = scratch.path("bad.zip"), output = scratch.path("out.zip");
    build_archive(input, {"zip", ARCHIVE_FORMAT_ZIP, ARCHIVE_FILTER_NONE},
                  {stored(file("a.pte", "FIXME a")), stored(file("notes.txt", "stored text, damaged below"))});
    std::string bytes = read_file(input);
    size_t at = bytes.find("damaged below");
    REQUIRE(at != std::string::npos);
    bytes[at] = 'D';
    write_file(input, bytes);
    std::string message = error_of([&] { rewrite_archive(input, output, 0644, fake_fix, scratch.options()); });
    MESSAGE(message);
    CHECK(message.rfind(input + ": notes.txt: ", 0) == 0);
    CHECK_FALSE(fs::exists(output));
    CHECK(read_file(input) == bytes);
  }
  SUBCASE("a tar whose second header is garbage") {
    std::string input = scratch.path("bad.tar"), output = scratch.path("out.tar");
    build_archive(input, {"ustar", ARCHIVE_FORMAT_TAR_USTAR, ARCHIVE_FILTER_NONE},
                  {file("a.pte", "FIXME a"), file("b.pte", "FIXME b")});
    std::string bytes = read_file(input);
    bytes[1024 + 100] = 'Z';  // inside b.pte's mode field: its checksum no longer matches
    write_file(input, bytes);
    std::string message = error_of([&] { rewrite_archive(input, output, 0644, fake_fix, scratch.options()); });
    MESSAGE(message);
    CHECK(message.rfind(input + ": after member a.pte: ", 0) == 0);
    CHECK_FALSE(fs::exists(output));
  }
  SUBCASE("a gzip that holds no tar") {
    std::string input = scratch.path("notes.gz");
    build_archive(input, {"raw.gz", ARCHIVE_FORMAT_RAW, ARCHIVE_FILTER_GZIP}, {file("data", "just some text")});
    CHECK_FALSE(looks_like_archive(bytes_of(read_file(input))));
    CHECK(error_of([&] { rewrite_archive(input, input, 0644, fake_fix, scratch.options()); }) != "");
  }
  CHECK(scratch.tmp_is_empty());
}

TEST_CASE("looks_like_archive: signatures, and a .pte is never one") {
  Scratch scratch;
  std::vector<Kind> kinds = all_kinds();
  for (const Kind& kind : kinds) {
    CAPTURE(kind.label);
    std::string path = scratch.path(kind.label);
    build_archive(path, kind, sample_members());
    std::string bytes = read_file(path);
    CHECK(looks_like_archive(bytes_of(bytes)));
    CHECK(looks_like_archive(bytes_of(bytes.substr(0, 4096))));  // a head is enough
  }
  std::string empty_zip = scratch.path("empty.zip");
  build_archive(empty_zip, {"zip", ARCHIVE_FORMAT_ZIP, ARCHIVE_FILTER_NONE}, {});
  CHECK(read_file(empty_zip).rfind("PK\x05\x06", 0) == 0);
  CHECK(looks_like_archive(bytes_of(read_file(empty_zip))));
  ArchiveResult nothing = rewrite_archive(empty_zip, empty_zip, 0644, fake_fix, scratch.options());
  CHECK(nothing.members == 0);
  CHECK_FALSE(nothing.written);
  std::string pte = std::string("\x1c\0\0\0ET12", 8) + std::string(600, '\0');
  CHECK_FALSE(looks_like_archive(bytes_of(pte)));
  std::string fake_tar(512, '\0');
  fake_tar.replace(257, 5, "ustar");  // the magic without a valid checksum
  CHECK_FALSE(looks_like_archive(bytes_of(fake_tar)));
  CHECK_FALSE(looks_like_archive(bytes_of("\x1f\x8b")));  // a gzip signature, then nothing
  CHECK_FALSE(looks_like_archive(bytes_of(std::string("\x28\xb5\x2f\xfd", 4) + "garbage")));
  CHECK_FALSE(looks_like_archive(Bytes()));
}
