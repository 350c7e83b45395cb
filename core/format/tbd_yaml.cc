// The YAML versions of .tbd, 1 to 4 (LLVM's TextStub.cpp): one document per library,
// each tagged with its version. Keys are checked as LLVM's YAML mapping checks them:
// an unknown or repeated key is an error, as it is to the linker, so that a typing
// mistake in a stub cannot silently empty a library.
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <set>
#include <sstream>

#include "core/base/error.h"
#include "core/format/tbd_internal.h"

namespace machofix::tbd {

namespace {

std::string at_line(const YAML::Node& node) {
  YAML::Mark mark = node.Mark();
  return mark.is_null() ? std::string() : "line " + std::to_string(mark.line + 1) + ": ";
}

[[noreturn]] void fail_in(const YAML::Node& node, const std::string& problem) { fail(at_line(node) + problem); }

// A mapping's entries by key, each key checked against those its version knows.
class Mapping {
 public:
  Mapping(const YAML::Node& node, const std::string& what, std::initializer_list<std::string_view> known)
      : node_(node), what_(what) {
    if (!node.IsMap()) fail_in(node, what + " is not a mapping");
    for (auto entry = node.begin(); entry != node.end(); ++entry) {
      if (!entry->first.IsScalar()) fail_in(entry->first, "a key of " + what + " is not a name");
      const std::string& key = entry->first.Scalar();
      if (std::find(known.begin(), known.end(), key) == known.end()) fail_in(entry->first, "unknown key '" + key + "' in " + what);
      if (!seen_.insert(key).second) fail_in(entry->first, "key '" + key + "' repeated in " + what);
      entries_.emplace_back(key, entry->second);
    }
  }

  // The value of `key`; an undefined node when it is absent.
  YAML::Node optional(std::string_view key) const {
    for (const auto& [name, value] : entries_)
      if (name == key) return value;
    return YAML::Node(YAML::NodeType::Undefined);
  }

  YAML::Node required(std::string_view key) const {
    YAML::Node value = optional(key);
    if (!value.IsDefined()) fail_in(node_, "'" + std::string(key) + "' is missing from " + what_);
    return value;
  }

 private:
  YAML::Node node_;
  std::string what_;
  std::set<std::string> seen_;
  std::vector<std::pair<std::string, YAML::Node>> entries_;
};

std::string scalar(const YAML::Node& node, const std::string& what) {
  if (!node.IsScalar()) fail_in(node, what + " is not a single value");
  return node.Scalar();
}

// A list; absent or empty ("exports:") is none.
std::vector<YAML::Node> list_of(const YAML::Node& node, const std::string& what) {
  std::vector<YAML::Node> items;
  if (!node.IsDefined() || node.IsNull()) return items;
  if (!node.IsSequence()) fail_in(node, what + " is not a list");
  for (const YAML::Node& item : node) items.push_back(item);
  return items;
}

// A list of names.
std::vector<std::string> names(const YAML::Node& node, const std::string& what) {
  std::vector<std::string> list;
  for (const YAML::Node& item : list_of(node, what)) {
    if (!item.IsScalar()) fail_in(item, "an entry of " + what + " is not a name");
    list.push_back(item.Scalar());
  }
  return list;
}

uint32_t version_of(const YAML::Node& node, const std::string& what) {
  if (!node.IsDefined()) return 0x10000;
  std::string text = scalar(node, what);
  std::optional<uint32_t> packed = packed_version(text);
  if (!packed) fail_in(node, what + " '" + text + "' is not a version X[.Y[.Z]] (X <= 65535, Y and Z <= 255)");
  return *packed;
}

std::vector<std::string> targets_of(const YAML::Node& node, const std::string& what) {
  std::vector<std::string> targets;
  for (const std::string& text : names(node, what)) {
    std::optional<std::string> target = normal_target(text);
    if (!target) fail_in(node, "'" + text + "' in " + what + " is not a target (ARCH-PLATFORM, as arm64-macos)");
    targets.push_back(*target);
  }
  return targets;
}

// ---- versions 1 to 3: architectures times one platform -------------------------

std::vector<std::string> platforms_of(const YAML::Node& node, int version) {
  std::string platform = scalar(node, "platform");
  if (platform == "macosx") return {"macos"};
  if (platform == "ios" || platform == "watchos" || platform == "tvos" || platform == "bridgeos") return {platform};
  // Catalyst, alone or with macOS, came with version 3 (TextStubCommon.cpp).
  if (version == 3 && platform == "iosmac") return {"maccatalyst"};
  if (version == 3 && platform == "zippered") return {"macos", "maccatalyst"};
  fail_in(node, "unknown platform '" + platform + "' for a tbd-v" + std::to_string(version) + " document");
}

// The platforms of a document for `archs` (TextStub.cpp, mapToPlatformType): an iOS,
// tvOS or watchOS stub with an Intel architecture is the simulator's. LLVM decides
// this for each section by the section's archs, so that an arm64 section of a
// simulator stub would be the device's; machofix decides it once, by the document's.
std::vector<std::string> simulator_or_device(std::vector<std::string> platforms, const std::vector<std::string>& archs) {
  bool intel = std::any_of(archs.begin(), archs.end(), [](const std::string& arch) {
    return arch == "i386" || arch == "x86_64" || arch == "x86_64h";
  });
  for (std::string& platform : platforms)
    if (intel && (platform == "ios" || platform == "tvos" || platform == "watchos")) platform += "-simulator";
  return platforms;
}

// The targets of a section built for `archs` (synthesizeTargets): every arch on every
// platform, but Catalyst has no i386.
std::vector<std::string> synthesized_targets(const std::vector<std::string>& archs, const std::vector<std::string>& platforms) {
  std::vector<std::string> targets;
  for (const std::string& platform : platforms)
    for (const std::string& arch : archs)
      if (!(arch == "i386" && platform == "maccatalyst")) targets.push_back(arch + "-" + platform);
  return targets;
}

std::vector<std::string> archs_of(const YAML::Node& node, const std::string& what) {
  std::vector<std::string> archs = names(node, what);
  for (const std::string& arch : archs)
    if (arch.empty()) fail_in(node, "an empty architecture in " + what);
  return archs;
}

// Versions 1 and 2 write a class or an ivar with a leading underscore, which LLVM
// drops (whatever the character); version 3 writes them bare.
std::vector<std::string> objc_names(const YAML::Node& node, const std::string& what, int version) {
  std::vector<std::string> list = names(node, what);
  if (version < 3)
    for (std::string& name : list) name.erase(0, 1);
  return list;
}

TbdLibrary read_v1_to_v3(const YAML::Node& document, int version) {
  std::string what = "the tbd-v" + std::to_string(version) + " document";
  Mapping keys = version == 1 ? Mapping(document, what,
                                        {"archs", "platform", "install-name", "current-version", "compatibility-version",
                                         "swift-version", "objc-constraint", "exports"})
                              : Mapping(document, what,
                                        {"archs", "uuids", "platform", "flags", "install-name", "current-version",
                                         "compatibility-version", version == 3 ? "swift-abi-version" : "swift-version",
                                         "objc-constraint", "parent-umbrella", "exports", "undefineds"});
  TbdLibrary library;
  std::vector<std::string> archs = archs_of(keys.required("archs"), "archs");
  std::vector<std::string> platforms = simulator_or_device(platforms_of(keys.required("platform"), version), archs);
  library.targets = synthesized_targets(archs, platforms);
  library.install_name = scalar(keys.required("install-name"), "install-name");
  library.current_version = version_of(keys.optional("current-version"), "current-version");
  library.compatibility_version = version_of(keys.optional("compatibility-version"), "compatibility-version");

  for (const YAML::Node& node : list_of(keys.optional("exports"), "exports")) {
    Mapping section = version == 1 ? Mapping(node, "an exports section",
                                             {"archs", "allowed-clients", "re-exports", "symbols", "objc-classes",
                                              "objc-ivars", "weak-def-symbols", "thread-local-symbols"})
                      : version == 2 ? Mapping(node, "an exports section",
                                               {"archs", "allowable-clients", "re-exports", "symbols", "objc-classes",
                                                "objc-ivars", "weak-def-symbols", "thread-local-symbols"})
                                     : Mapping(node, "an exports section",
                                               {"archs", "allowable-clients", "re-exports", "symbols", "objc-classes",
                                                "objc-eh-types", "objc-ivars", "weak-def-symbols", "thread-local-symbols"});
    TbdSection out;
    out.targets = synthesized_targets(archs_of(section.required("archs"), "archs"), platforms);
    out.reexported_libraries = names(section.optional("re-exports"), "re-exports");
    // Versions 1 and 2 list EH types among the symbols, as _OBJC_EHTYPE_$_X: the
    // linker name they have as EH types too, so they stay symbols here.
    out.symbols = names(section.optional("symbols"), "symbols");
    out.objc_classes = objc_names(section.optional("objc-classes"), "objc-classes", version);
    out.objc_eh_types = names(section.optional("objc-eh-types"), "objc-eh-types");
    out.objc_ivars = objc_names(section.optional("objc-ivars"), "objc-ivars", version);
    out.weak_symbols = names(section.optional("weak-def-symbols"), "weak-def-symbols");
    out.thread_local_symbols = names(section.optional("thread-local-symbols"), "thread-local-symbols");
    library.sections.push_back(std::move(out));
  }
  return library;
}

// ---- version 4: explicit targets -------------------------------------------------

// An exports, reexports or undefineds section (SymbolSection).
TbdSection symbol_section(const YAML::Node& node, const std::string& what) {
  Mapping section(node, what,
                  {"targets", "symbols", "objc-classes", "objc-eh-types", "objc-ivars", "weak-symbols", "thread-local-symbols"});
  TbdSection out;
  out.targets = targets_of(section.required("targets"), "targets");
  out.symbols = names(section.optional("symbols"), "symbols");
  out.objc_classes = names(section.optional("objc-classes"), "objc-classes");
  out.objc_eh_types = names(section.optional("objc-eh-types"), "objc-eh-types");
  out.objc_ivars = names(section.optional("objc-ivars"), "objc-ivars");
  out.weak_symbols = names(section.optional("weak-symbols"), "weak-symbols");
  out.thread_local_symbols = names(section.optional("thread-local-symbols"), "thread-local-symbols");
  return out;
}

TbdLibrary read_v4(const YAML::Node& document) {
  Mapping keys(document, "the tbd-version 4 document",
               {"tbd-version", "targets", "uuids", "flags", "install-name", "current-version", "compatibility-version",
                "swift-abi-version", "parent-umbrella", "allowable-clients", "reexported-libraries", "exports",
                "reexports", "undefineds"});
  YAML::Node tbd_version = keys.required("tbd-version");
  if (scalar(tbd_version, "tbd-version") != "4") fail_in(tbd_version, "a document tagged !tapi-tbd is tbd-version 4, not " + tbd_version.Scalar());
  TbdLibrary library;
  library.targets = targets_of(keys.required("targets"), "targets");
  library.install_name = scalar(keys.required("install-name"), "install-name");
  library.current_version = version_of(keys.optional("current-version"), "current-version");
  library.compatibility_version = version_of(keys.optional("compatibility-version"), "compatibility-version");
  for (const YAML::Node& node : list_of(keys.optional("reexported-libraries"), "reexported-libraries")) {
    Mapping entry(node, "a reexported-libraries entry", {"targets", "libraries"});
    TbdSection out;
    out.targets = targets_of(entry.required("targets"), "targets");
    out.reexported_libraries = names(entry.required("libraries"), "libraries");
    library.sections.push_back(std::move(out));
  }
  for (const YAML::Node& node : list_of(keys.optional("exports"), "exports"))
    library.sections.push_back(symbol_section(node, "an exports section"));
  for (const YAML::Node& node : list_of(keys.optional("reexports"), "reexports")) {
    library.sections.push_back(symbol_section(node, "a reexports section"));
    library.sections.back().reexported = true;
  }
  // Undefined symbols say what the library imports, not what it provides: checked, not kept.
  for (const YAML::Node& node : list_of(keys.optional("undefineds"), "undefineds")) symbol_section(node, "an undefineds section");
  return library;
}

// The version a document's tag names (setFileTypeForInput): an untagged document is
// version 1.
int version_of_tag(const YAML::Node& document) {
  const std::string& tag = document.Tag();
  if (tag == "!tapi-tbd") return 4;
  if (tag == "!tapi-tbd-v3") return 3;
  if (tag == "!tapi-tbd-v2") return 2;
  if (tag == "!tapi-tbd-v1" || tag == "?" || tag.empty() || tag == "tag:yaml.org,2002:map") return 1;
  fail_in(document, "a document tagged '" + tag + "', not a tapi-tbd tag");
}

// yaml-cpp 0.7's LoadAll loops forever, allocating all the while, on a token no value
// can start with at the top of a document (a stray ',' as in "{},", found by
// fuzz_tbd): the parser reports an empty document without consuming the token, and
// LoadAll asks it for the next one again (fixed after 0.8, yaml-cpp PR #1319). A
// .tbd may have no empty document anyway, so the parser's events are read first and
// the first empty document refused, before LoadAll can meet one.
class EmptyDocumentFinder : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark&) override { values_ = 0, null_ = false; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override {
    if (values_++ == 0) null_ = true, mark_ = mark;
  }
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override { ++values_; }
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override { ++values_; }
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override { ++values_; }
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override { ++values_; }
  void OnMapEnd() override {}

  // The document just read is a null alone: empty, or stopped at a stray token.
  bool empty() const { return values_ == 1 && null_; }
  const YAML::Mark& mark() const { return mark_; }

 private:
  size_t values_ = 0;
  bool null_ = false;
  YAML::Mark mark_;
};

void refuse_empty_documents(const std::string& text) {
  std::istringstream input(text);
  YAML::Parser parser(input);
  EmptyDocumentFinder finder;
  for (size_t document = 1; parser.HandleNextDocument(finder); ++document)
    if (finder.empty())
      fail("document " + std::to_string(document) + " is empty (line " + std::to_string(finder.mark().line + 1) +
           ", column " + std::to_string(finder.mark().column + 1) + ")");
}

}  // namespace

TbdFile parse_yaml(std::string_view text) {
  std::vector<YAML::Node> documents;
  try {
    std::string yaml(text);
    refuse_empty_documents(yaml);
    documents = YAML::LoadAll(yaml);
  } catch (const YAML::Exception& error) {
    fail(error.mark.is_null() ? error.msg
                              : "line " + std::to_string(error.mark.line + 1) + ", column " +
                                    std::to_string(error.mark.column + 1) + ": " + error.msg);
  }
  TbdFile file;
  try {
    for (const YAML::Node& document : documents) {
      if (!document.IsDefined() || document.IsNull()) fail("document " + std::to_string(file.libraries.size() + 1) + " is empty");
      int version = version_of_tag(document);
      file.libraries.push_back(version == 4 ? read_v4(document) : read_v1_to_v3(document, version));
    }
  } catch (const YAML::Exception& error) {  // a node used as what it is not: checked above, so a bug
    fail(at_line(documents.empty() ? YAML::Node() : documents.front()) + "unreadable YAML: " + error.msg);
  }
  if (file.libraries.empty()) fail("no document");
  return file;
}

}  // namespace machofix::tbd
