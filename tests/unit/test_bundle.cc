// core/app/bundle: an application bundle's main executable from its Info.plist, XML
// or binary (written here by libplist itself), in a macOS bundle and a flat one; and
// each way an Info.plist can fail, named in the Info.plist's file.
#include <doctest/doctest.h>

#include <plist/plist.h>
#include <stdlib.h>
#include <unistd.h>  // mkdtemp on macOS

#include <filesystem>
#include <fstream>

#include "core/app/bundle.h"
#include "tests/support/thrown.h"

using namespace machofix;
using namespace machofix::test;

namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  TempDir() {
    char pattern[] = "/tmp/machofix-bundle-XXXXXX";
    path = mkdtemp(pattern);
  }
  ~TempDir() { fs::remove_all(path); }
};

void write(const fs::path& path, const std::string& bytes) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

enum class Format { Xml, Binary };

// `root` as libplist writes it; `root` is freed.
std::string serialized(plist_t root, Format format) {
  char* data = nullptr;
  uint32_t length = 0;
  if (format == Format::Xml) plist_to_xml(root, &data, &length);
  else plist_to_bin(root, &data, &length);
  std::string bytes(data, length);
  if (format == Format::Xml) plist_to_xml_free(data);
  else plist_to_bin_free(data);
  plist_free(root);
  return bytes;
}

// An Info.plist as Xcode writes one, with CFBundleExecutable `executable` (a string),
// or none.
std::string info_plist(Format format, const char* executable) {
  plist_t root = plist_new_dict();
  plist_dict_set_item(root, "CFBundleIdentifier", plist_new_string("com.example.app"));
  plist_dict_set_item(root, "CFBundlePackageType", plist_new_string("APPL"));
  plist_dict_set_item(root, "LSRequiresIPhoneOS", plist_new_bool(0));
  plist_t versions = plist_new_array();
  plist_array_append_item(versions, plist_new_string("11.0"));
  plist_dict_set_item(root, "LSMinimumSystemVersionByArchitecture", versions);
  if (executable) plist_dict_set_item(root, "CFBundleExecutable", plist_new_string(executable));
  return serialized(root, format);
}

// X.app/Contents/{Info.plist,MacOS/App}.
fs::path mac_bundle(const TempDir& temp, const std::string& plist, const char* file = "App") {
  fs::path app = temp.path / "X.app";
  write(app / "Contents" / "Info.plist", plist);
  if (file) write(app / "Contents" / "MacOS" / file, "\xcf\xfa\xed\xfe");
  return app;
}

// The Error reading the bundle throws, checked to be a malformed Info.plist of `app`'s.
std::string problem_of(const fs::path& app) {
  std::optional<Error> error = thrown_as(ErrorKind::Malformed, [&] { bundle_executable(app.string()); });
  if (!error) return "";
  CHECK(error->file() == (app / "Contents" / "Info.plist").string());
  return error->problem();
}

}  // namespace

TEST_CASE("bundle: the executable an XML or binary Info.plist names, in Contents/MacOS") {
  for (Format format : {Format::Xml, Format::Binary}) {
    TempDir temp;
    fs::path app = mac_bundle(temp, info_plist(format, "App"));
    CHECK(is_app_bundle(app.string()));
    CHECK(bundle_executable(app.string()) == (app / "Contents" / "MacOS" / "App").string());
  }
}

TEST_CASE("bundle: a flat bundle (iOS style) has its Info.plist and executable at the top") {
  for (Format format : {Format::Xml, Format::Binary}) {
    TempDir temp;
    fs::path app = temp.path / "Y.app";
    write(app / "Info.plist", info_plist(format, "Runner"));
    write(app / "Runner", "\xcf\xfa\xed\xfe");
    CHECK(is_app_bundle(app.string()));
    CHECK(bundle_executable(app.string()) == (app / "Runner").string());
  }
}

TEST_CASE("bundle: an XML Info.plist as Xcode writes it: declaration, doctype, comment, entities") {
  TempDir temp;
  fs::path app = mac_bundle(temp, R"(<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<!-- generated -->
<dict>
	<key>CFBundleName</key>
	<string>R&amp;D</string>
	<key>CFBundleExecutable</key>
	<string>R&amp;D App</string>
</dict>
</plist>
)", "R&D App");
  CHECK(bundle_executable(app.string()) == (app / "Contents" / "MacOS" / "R&D App").string());
}

TEST_CASE("bundle: what is not a bundle") {
  TempDir temp;
  CHECK(!is_app_bundle(temp.path.string()));
  CHECK(!is_app_bundle((temp.path / "missing.app").string()));
  write(temp.path / "file.app", "x");
  CHECK(!is_app_bundle((temp.path / "file.app").string()));
  fs::create_directories(temp.path / "dir.app" / "Contents" / "Info.plist");  // a directory of that name
  CHECK(!is_app_bundle((temp.path / "dir.app").string()));
  std::optional<Error> error = thrown_as(ErrorKind::Malformed, [&] { bundle_executable((temp.path / "dir.app").string()); });
  REQUIRE(error);
  CHECK(error->file() == (temp.path / "dir.app").string());
  CHECK(error->problem().find("not an application bundle") == 0);
}

TEST_CASE("bundle: each way an Info.plist fails, named in the Info.plist") {
  TempDir temp;
  CHECK(problem_of(mac_bundle(temp, "this is not a property list")).find("not a property list") == 0);
  CHECK(problem_of(mac_bundle(temp, "")).find("not a property list") == 0);
  std::string binary = info_plist(Format::Binary, "App");
  CHECK(problem_of(mac_bundle(temp, binary.substr(0, binary.size() / 2))).find("not a valid binary property list") == 0);
  CHECK(problem_of(mac_bundle(temp, binary.substr(0, 8))).find("not a valid binary property list") == 0);
  CHECK(problem_of(mac_bundle(temp, serialized(plist_new_array(), Format::Binary))).find("not a dictionary") != std::string::npos);
  CHECK(problem_of(mac_bundle(temp, info_plist(Format::Xml, nullptr))).find("no CFBundleExecutable") == 0);

  plist_t number = plist_new_dict();
  plist_dict_set_item(number, "CFBundleExecutable", plist_new_uint(7));
  CHECK(problem_of(mac_bundle(temp, serialized(number, Format::Binary))).find("CFBundleExecutable is not a string") == 0);

  for (const char* name : {"", ".", "..", "MacOS/App", "../../../bin/sh"}) {
    CAPTURE(name);
    CHECK(problem_of(mac_bundle(temp, info_plist(Format::Xml, name))).find("is not a file name") != std::string::npos);
  }
  CHECK(problem_of(mac_bundle(temp, info_plist(Format::Xml, "Other"))) ==
        "CFBundleExecutable names 'Other', which is not in Contents/MacOS");
  fs::path app = mac_bundle(temp, info_plist(Format::Binary, "Folder"));
  fs::create_directories(app / "Contents" / "MacOS" / "Folder");
  CHECK(problem_of(app) == "CFBundleExecutable names 'Folder', which is not a file");

  // Larger than any Info.plist: refused before it is parsed.
  CHECK(problem_of(mac_bundle(temp, std::string((16 << 20) + 1, ' '))).find("more than the 16 MiB") != std::string::npos);
}

TEST_CASE("bundle: broken property lists are an Error, never a crash") {
  TempDir temp;
  for (Format format : {Format::Xml, Format::Binary}) {
    std::string good = info_plist(format, "App");
    for (size_t at = 0; at < good.size(); at += 3) {
      for (char byte : {'\0', '\xff', '<', '>', '\x7f', '\x10'}) {
        std::string changed = good;
        changed[at] = byte;
        fs::path app = mac_bundle(temp, changed);
        try {
          bundle_executable(app.string());
        } catch (const Error&) {
        }
      }
    }
  }
}
