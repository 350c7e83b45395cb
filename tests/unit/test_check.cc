// check's rules (core/jobs/check.h) on synthetic reports, and the contract file
// (core/jobs/contract.h): what each rule finds, which need a declaration, how a contract
// file is read, refused and found.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/jobs/check.h"
#include "core/jobs/contract.h"
#include "core/base/error.h"

using namespace machofix;

namespace {

DylibReport dylib(const std::string& name, DylibKind kind = DylibKind::Load, bool used = true) {
  DylibReport report;
  report.install_name = name;
  report.kind = kind;
  if (used) report.symbols = {"_f"};
  report.decision = DylibDecision{1, used ? DylibVerdict::Supplies : DylibVerdict::Unused, used ? 1u : 0u};
  report.command_offset = 0x100;
  return report;
}

FileReport file_with(std::vector<DylibReport> dylibs, std::vector<std::string> rpaths = {}) {
  SliceReport slice;
  slice.arch = "arm64";
  slice.dylibs = std::move(dylibs);
  uint64_t offset = 0x200;
  for (const std::string& path : rpaths) slice.rpaths.push_back({path, offset += 0x20});
  FileReport report;
  report.path = "model.dylib";
  report.status = FileStatus::Inspected;
  report.macho = MachOReport{};
  report.macho->slices.push_back(slice);
  return report;
}

std::vector<Rule> rules_of(const std::vector<Finding>& findings) {
  std::vector<Rule> rules;
  for (const Finding& finding : findings) rules.push_back(finding.rule);
  return rules;
}

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    char pattern[] = "/tmp/machofix-check-XXXXXX";
    path = mkdtemp(pattern);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string write(const std::string& name, const std::string& text) const {
    std::filesystem::create_directories((path / name).parent_path());
    std::ofstream(path / name) << text;
    return (path / name).string();
  }
};

std::string refusal(const std::string& path) {
  try {
    read_contract(path);
  } catch (const Error& error) {
    return error.describe();
  }
  return "";
}

}  // namespace

TEST_CASE("without a declaration only the plain rules run") {
  FileReport report = file_with({dylib("@rpath/libfoo.dylib"), dylib("/opt/x/libomp.dylib", DylibKind::Load, false),
                                 dylib("@rpath/libbar.dylib", DylibKind::Weak)},
                                {"/opt/build/lib", "@loader_path", "@loader_path/", "@loader_path"});
  CheckOptions none;
  CHECK(rules_of(check_findings(report, none)) == std::vector<Rule>{Rule::UnusedDependency, Rule::AbsoluteInstallName});
  CheckOptions declared;
  declared.declared = true;
  declared.required = {"libbar.dylib"};
  std::vector<Finding> findings = check_findings(report, declared);
  CHECK(rules_of(findings) == std::vector<Rule>{Rule::UnprovidedDependency, Rule::UnusedDependency,
                                                Rule::AbsoluteInstallName, Rule::WeakRequiredDependency,
                                                Rule::AbsoluteRpath, Rule::DuplicateRpath});
  CHECK(findings[0].dylib == "@rpath/libfoo.dylib");
  CHECK(findings[0].offset == 0x100u);
  CHECK(findings[4].rpath == "/opt/build/lib");
  CHECK(findings[4].offset == 0x220u);
  REQUIRE(findings.size() == 6);
  CHECK(findings[5].rpath == "@loader_path");  // byte for byte: "@loader_path/" is another path (dyld's strcmp)
  CHECK(findings[5].offset == 0x280u);
  CHECK(findings[3].glob == "libbar.dylib");
}

TEST_CASE("what the contract declares excuses") {
  FileReport report = file_with({dylib("@rpath/libfoo.dylib"), dylib("/opt/x/libomp.dylib")},
                                {"/opt/x/lib", "/usr/lib/swift", "lib"});
  CheckOptions contract;
  contract.declared = true;
  contract.provided = {"@rpath/libfoo.dylib", "/opt/x/*"};
  CHECK(rules_of(check_findings(report, contract)) == std::vector<Rule>{Rule::AbsoluteRpath, Rule::AbsoluteRpath});
  contract.allowed_rpaths = {"/opt/x/*"};
  std::vector<Finding> findings = check_findings(report, contract);
  REQUIRE(findings.size() == 1);
  CHECK(findings[0].rpath == "lib");  // relative to the current directory: a build machine's too
  contract.allowed_prefixes = {"/opt/"};
  contract.provided = {"libfoo.dylib"};  // the last component matches
  CHECK(check_findings(report, contract).size() == 1);
  contract.forbidden = {"*omp*"};
  std::vector<Finding> forbidden = check_findings(report, contract);
  CHECK(rules_of(forbidden) == std::vector<Rule>{Rule::ForbiddenDependency, Rule::AbsoluteRpath});
  CHECK(forbidden[0].glob == "*omp*");
}

TEST_CASE("a weak dependency is optional: no unprovided finding, required ones are") {
  FileReport report = file_with({dylib("@rpath/libomp.dylib", DylibKind::Weak)});
  CheckOptions contract;
  contract.declared = true;
  CHECK(check_findings(report, contract).empty());
  contract.required = {"@rpath/libomp.dylib"};
  CHECK(rules_of(check_findings(report, contract)) == std::vector<Rule>{Rule::WeakRequiredDependency});
}

TEST_CASE("contract files: read, combined, refused with file, line and key") {
  TempDir dir;
  std::string good = dir.write("good.toml",
                               "# a comment\nprovided = ['@rpath/a.dylib', '@rpath/b.dylib']\nallow_prefix = '/opt/'\n"
                               "allowed_rpaths = []\nforbid = ['*omp*']\nrequired = 'libc++.1.dylib'\n");
  CheckOptions contract = read_contract(good);
  CHECK(contract.declared);
  CHECK(contract.provided == std::vector<std::string>{"@rpath/a.dylib", "@rpath/b.dylib"});
  CHECK(contract.allowed_prefixes == std::vector<std::string>{"/opt/"});
  CHECK(contract.forbidden == std::vector<std::string>{"*omp*"});
  CHECK(contract.required == std::vector<std::string>{"libc++.1.dylib"});
  CheckOptions extra;
  extra.provided = {"@rpath/c.dylib"};
  CheckOptions both = combined(contract, extra);
  CHECK(both.provided.size() == 3);
  CHECK(both.declared);
  CHECK(read_contract(dir.write("empty.toml", "")).declared);  // an empty contract declares that nothing is shipped

  CHECK(refusal(dir.write("typo.toml", "provided = []\nforbidd = ['x']\n")) ==
        dir.path.string() + "/typo.toml: line 2, column 1: unknown key 'forbidd' (the keys are provided, allow_prefix, "
                            "allowed_rpaths, forbid, required, arch, ptd, app, sysroot, min_macos, load_as, warnings_as_errors, [levels], [[exempt]])");
  std::string table = refusal(dir.write("table.toml", "[provided]\nx = 1\n"));
  CHECK(table.find("line 1, column ") != std::string::npos);
  CHECK(table.find("key 'provided' takes a string or an array") != std::string::npos);
  CHECK(refusal(dir.write("dotted.toml", "provided.x = 'a'\n")).find("key 'provided' takes a string or an array") !=
        std::string::npos);
  CHECK(refusal(dir.write("nested.toml", "forbid = [['a']]\n")).find("every entry must be a string") != std::string::npos);
  CHECK(refusal(dir.write("twice.toml", "forbid = 'a'\nforbid = 'b'\n")).find("line 2") != std::string::npos);
  CHECK(refusal(dir.write("binary.toml", std::string("forbid = '\xff'\n"))).find("not a valid TOML file") !=
        std::string::npos);
  CHECK(refusal((dir.path / "absent.toml").string()).find("cannot read the contract file") != std::string::npos);
}

TEST_CASE("a contract is found in the model's directory, then its parents") {
  TempDir dir;
  std::string top = dir.write("machofix.toml", "");
  std::filesystem::create_directories(dir.path / "a" / "b");
  CHECK(find_contract((dir.path / "a" / "b" / "model.pte").string()) == top);
  std::string near = dir.write("a/b/machofix.toml", "");
  CHECK(find_contract((dir.path / "a" / "b" / "model.pte").string()) == near);
  CHECK(find_contract((dir.path / "a" / "model.pte").string()) == top);
  std::filesystem::create_directories(dir.path / "a" / "machofix.toml");  // a directory of that name is no contract
  CHECK(find_contract((dir.path / "a" / "model.pte").string()) == top);
}
