// core/format/tbd: Apple's text-based stubs, every version (YAML 1-4, JSON 5): targets,
// inlined libraries, the linker names of Objective-C entries, re-exports, and errors
// that say what is wrong and where; then the libSystem stubs zig ships, when cached.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/format/tbd.h"
#include "tests/support/thrown.h"

using namespace machofix;
using namespace machofix::test;

namespace {

bool has(const std::vector<std::string>& list, const std::string& name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

// The problem of the Error parsing `text` throws (a malformed file, always).
std::string problem_of(const std::string& text) {
  std::optional<Error> error = thrown_as(ErrorKind::Malformed, [&] { parse_tbd(text); });
  return error ? error->problem() : "";
}

const char* const kV1 = R"(---
archs:           [ i386, x86_64 ]
platform:        macosx
install-name:    /usr/lib/libold.dylib
exports:
  - archs:           [ i386, x86_64 ]
    allowed-clients: [ Client ]
    re-exports:      [ /usr/lib/libinner.dylib ]
    symbols:         [ _old_function ]
    objc-classes:    [ _OldClass ]
    objc-ivars:      [ _OldClass._field ]
    weak-def-symbols: [ _old_weak ]
    thread-local-symbols: [ _old_tlv ]
  - archs:           [ x86_64 ]
    symbols:         [ _only_x86_64 ]
...
)";

const char* const kV2 = R"(--- !tapi-tbd-v2
archs:           [ armv7, arm64 ]
uuids:           [ 'armv7: 00000000-0000-0000-0000-000000000000' ]
platform:        ios
flags:           [ flat_namespace ]
install-name:    /usr/lib/libtwo.dylib
current-version: 2.1.3
compatibility-version: 2
swift-version:   3
objc-constraint: retain_release
parent-umbrella: System
exports:
  - archs:           [ armv7, arm64 ]
    allowable-clients: [ Client ]
    symbols:         [ _two, '_OBJC_EHTYPE_$_TwoError' ]
    objc-classes:    [ _TwoClass ]
undefineds:
  - archs:           [ arm64 ]
    symbols:         [ _imported ]
...
)";

const char* const kV3 = R"(--- !tapi-tbd-v3
archs:           [ i386, x86_64 ]
platform:        zippered
install-name:    '/System/Library/Frameworks/Three.framework/Versions/A/Three'
current-version: 1319.100.3
swift-abi-version: 5
exports:
  - archs:           [ i386, x86_64 ]
    symbols:         [ _three ]
    objc-classes:    [ ThreeClass ]
    objc-eh-types:   [ ThreeError ]
    objc-ivars:      [ ThreeClass.count ]
...
)";

const char* const kV4 = R"(--- !tapi-tbd
tbd-version:     4
targets:         [ x86_64-macos, arm64-macos, arm64e-macos ]
install-name:    '/usr/lib/libSystem.B.dylib'
current-version: 1319.100.3
compatibility-version: 1
reexported-libraries:
  - targets:         [ x86_64-macos, arm64-macos, arm64e-macos ]
    libraries:       [ '/usr/lib/system/libsystem_c.dylib', '/usr/lib/system/libsystem_m.dylib' ]
  - targets:         [ arm64-macos ]
    libraries:       [ '/usr/lib/system/libarm64only.dylib', '/usr/lib/system/libsystem_c.dylib' ]
exports:
  - targets:         [ x86_64-macos ]
    symbols:         [ 'R8289209$_close' ]
  - targets:         [ x86_64-macos, arm64-macos, arm64e-macos ]
    symbols:         [ _mach_init_routine ]
    weak-symbols:    [ _weak_one ]
    thread-local-symbols: [ _tlv_one ]
    objc-classes:    [ NSObject ]
    objc-eh-types:   [ NSException ]
    objc-ivars:      [ NSObject.isa ]
reexports:
  - targets:         [ arm64-macos ]
    symbols:         [ _reexported_here ]
undefineds:
  - targets:         [ arm64-macos ]
    symbols:         [ _dyld_stub_binder ]
--- !tapi-tbd
tbd-version:     4
targets:         [ x86_64-macos, arm64-macos ]
install-name:    '/usr/lib/system/libsystem_c.dylib'
parent-umbrella:
  - targets:         [ x86_64-macos, arm64-macos ]
    umbrella:        System
exports:
  - targets:         [ x86_64-macos, arm64-macos ]
    symbols:         [ _printf, _puts ]
--- !tapi-tbd
tbd-version:     4
targets:         [ x86_64-macos, arm64-macos ]
install-name:    '/usr/lib/system/libsystem_m.dylib'
exports:
  - targets:         [ arm64-macos ]
    symbols:         [ _sqrt ]
...
)";

const char* const kV5 = R"({
  "tapi_tbd_version": 5,
  "main_library": {
    "target_info": [ { "target": "x86_64-macos", "min_deployment": "10.14" },
                     { "target": "arm64-macos", "min_deployment": "11" } ],
    "install_names": [ { "name": "/System/Library/Frameworks/Five.framework/Five" } ],
    "current_versions": [ { "version": "5.4.3" } ],
    "compatibility_versions": [ { "version": "1.1" } ],
    "flags": [ { "attributes": [ "not_app_extension_safe" ] } ],
    "reexported_libraries": [ { "names": [ "/usr/lib/libeverywhere.dylib" ] },
                              { "targets": [ "arm64-macos" ], "names": [ "/usr/lib/libarm.dylib" ] } ],
    "exported_symbols": [
      { "text": { "global": [ "_everywhere" ], "weak": [ "_weak_five" ] },
        "data": { "thread_local": [ "_tlv_five" ], "objc_class": [ "FiveClass" ],
                  "objc_eh_type": [ "FiveError" ], "objc_ivar": [ "FiveClass.value" ] } },
      { "targets": [ "arm64-macos" ], "text": { "global": [ "_arm64_only" ] } } ],
    "reexported_symbols": [ { "targets": [ "x86_64-macos" ], "data": { "global": [ "_reexported_x86" ] } } ],
    "undefined_symbols": [ { "text": { "global": [ "_imported" ] } } ]
  },
  "libraries": [ {
    "target_info": [ { "target": "arm64-macos", "min_deployment": "11" } ],
    "install_names": [ { "name": "/usr/lib/libarm.dylib" } ],
    "exported_symbols": [ { "text": { "global": [ "_from_inlined" ] } } ]
  } ]
})";

std::vector<std::string> targets(std::initializer_list<const char*> list) { return {list.begin(), list.end()}; }

}  // namespace

TEST_CASE("tbd: a target is an architecture and a platform, v1-v3 platform names mapped") {
  CHECK(tbd_target("arm64") == "arm64-macos");
  CHECK(tbd_target("x86_64", "maccatalyst") == "x86_64-maccatalyst");
  CHECK(tbd_target("arm64e", "macosx") == "arm64e-macos");
  CHECK(tbd_target("x86_64", "iosmac") == "x86_64-maccatalyst");
  CHECK(tbd_target("arm64", "ios-simulator") == "arm64-ios-simulator");
}

TEST_CASE("tbd: the linker's test of what is a stub") {
  CHECK(looks_like_tbd(kV1));
  CHECK(looks_like_tbd(kV2));
  CHECK(looks_like_tbd(kV3));
  CHECK(looks_like_tbd(kV4));
  CHECK(looks_like_tbd(kV5));
  CHECK(looks_like_tbd("\n  --- !tapi-tbd-v1\narchs: []\n...  \n"));
  CHECK(!looks_like_tbd(""));
  CHECK(!looks_like_tbd("--- !tapi-tbd\ntbd-version: 4\n"));  // no "..." at the end
  CHECK(!looks_like_tbd("--- !other\na: 1\n..."));
  CHECK(!looks_like_tbd("---\nfoo: 1\n..."));
  CHECK(!looks_like_tbd("{\"a\": 1}"));  // a JSON object, not a stub
  CHECK(!looks_like_tbd("\xcf\xfa\xed\xfe"));  // a Mach-O file
}

TEST_CASE("tbd v1: archs times platform, leading underscores of ObjC names dropped, sections by arch") {
  TbdFile file = parse_tbd(kV1);
  REQUIRE(file.libraries.size() == 1);
  const TbdLibrary& library = file.libraries[0];
  CHECK(library.install_name == "/usr/lib/libold.dylib");
  CHECK(library.current_version == 0x10000);  // 1.0 when unsaid
  CHECK(library.compatibility_version == 0x10000);
  CHECK(library.targets == targets({"i386-macos", "x86_64-macos"}));
  CHECK(library.has_target("x86_64-macos"));
  CHECK(!library.has_target("arm64-macos"));
  CHECK(library.exports("x86_64-macos") ==
        std::vector<std::string>{"_OBJC_CLASS_$_OldClass", "_OBJC_IVAR_$_OldClass._field", "_OBJC_METACLASS_$_OldClass",
                                 "_old_function", "_old_tlv", "_old_weak", "_only_x86_64"});
  // i386 macOS has the ObjC 1 runtime: one symbol per class.
  CHECK(library.exports("i386-macos") == std::vector<std::string>{".objc_class_name_OldClass", "_OBJC_IVAR_$_OldClass._field",
                                                                  "_old_function", "_old_tlv", "_old_weak"});
  CHECK(library.exports("arm64-macos").empty());
  CHECK(library.reexported_libraries("i386-macos") == std::vector<std::string>{"/usr/lib/libinner.dylib"});
  CHECK(library.reexported_libraries("arm64-macos").empty());
}

TEST_CASE("tbd v2: every key LLVM maps, versions packed, EH types among the symbols") {
  TbdFile file = parse_tbd(kV2);
  REQUIRE(file.libraries.size() == 1);
  const TbdLibrary& library = file.libraries[0];
  CHECK(library.targets == targets({"armv7-ios", "arm64-ios"}));  // no Intel arch: the device, not the simulator
  CHECK(library.current_version == 0x20103);
  CHECK(library.compatibility_version == 0x20000);
  CHECK(library.exports("arm64-ios") ==
        std::vector<std::string>{"_OBJC_CLASS_$_TwoClass", "_OBJC_EHTYPE_$_TwoError", "_OBJC_METACLASS_$_TwoClass", "_two"});
  CHECK(!has(library.exports("arm64-ios"), "_imported"));  // undefineds are imports
}

TEST_CASE("tbd v3: zippered is macOS and Catalyst without i386; bare ObjC names; EH types") {
  TbdFile file = parse_tbd(kV3);
  const TbdLibrary& library = file.libraries.at(0);
  CHECK(library.targets == targets({"i386-macos", "x86_64-macos", "x86_64-maccatalyst"}));
  CHECK(library.current_version == ((1319u << 16) | (100u << 8) | 3u));
  std::vector<std::string> expected = {"_OBJC_CLASS_$_ThreeClass", "_OBJC_EHTYPE_$_ThreeError", "_OBJC_IVAR_$_ThreeClass.count",
                                       "_OBJC_METACLASS_$_ThreeClass", "_three"};
  CHECK(library.exports("x86_64-maccatalyst") == expected);
  CHECK(library.exports("x86_64-macos") == expected);
  CHECK(!has(library.exports("i386-macos"), "_OBJC_CLASS_$_ThreeClass"));
  CHECK(has(library.exports("i386-macos"), ".objc_class_name_ThreeClass"));
  CHECK(library.exports("i386-maccatalyst").empty());

  // iOS with an Intel architecture is the simulator's (mapToPlatformType), for every
  // arch and every section, whichever archs the section lists.
  TbdFile simulator = parse_tbd("--- !tapi-tbd-v3\narchs: [ x86_64, arm64 ]\nplatform: ios\ninstall-name: /usr/lib/libsim.dylib\n"
                                "exports:\n  - archs: [ arm64 ]\n    symbols: [ _sim ]\n...\n");
  CHECK(simulator.libraries[0].targets == targets({"x86_64-ios-simulator", "arm64-ios-simulator"}));
  CHECK(simulator.libraries[0].exports("arm64-ios-simulator") == std::vector<std::string>{"_sim"});
  TbdFile catalyst = parse_tbd("--- !tapi-tbd-v3\narchs: [ x86_64 ]\nplatform: iosmac\ninstall-name: /usr/lib/libc.dylib\n...\n");
  CHECK(catalyst.libraries[0].targets == targets({"x86_64-maccatalyst"}));
}

TEST_CASE("tbd v4: targets per section, re-exported libraries and symbols, inlined documents") {
  TbdFile file = parse_tbd(kV4);
  REQUIRE(file.libraries.size() == 3);
  const TbdLibrary& system = file.libraries[0];
  CHECK(system.install_name == "/usr/lib/libSystem.B.dylib");
  CHECK(system.targets == targets({"x86_64-macos", "arm64-macos", "arm64e-macos"}));
  CHECK(system.current_version == ((1319u << 16) | (100u << 8) | 3u));
  CHECK(system.compatibility_version == 0x10000);
  CHECK(system.exports("arm64-macos") ==
        std::vector<std::string>{"_OBJC_CLASS_$_NSObject", "_OBJC_EHTYPE_$_NSException", "_OBJC_IVAR_$_NSObject.isa",
                                 "_OBJC_METACLASS_$_NSObject", "_mach_init_routine", "_reexported_here", "_tlv_one", "_weak_one"});
  CHECK(has(system.exports("x86_64-macos"), "R8289209$_close"));
  CHECK(!has(system.exports("arm64-macos"), "R8289209$_close"));
  CHECK(!has(system.exports("x86_64-macos"), "_reexported_here"));
  CHECK(!has(system.exports("arm64-macos"), "_dyld_stub_binder"));  // an undefined
  CHECK(system.exports("x86_64-maccatalyst").empty());
  // In the file's order, each once.
  CHECK(system.reexported_libraries("arm64-macos") ==
        std::vector<std::string>{"/usr/lib/system/libsystem_c.dylib", "/usr/lib/system/libsystem_m.dylib",
                                 "/usr/lib/system/libarm64only.dylib"});
  CHECK(system.reexported_libraries("x86_64-macos") ==
        std::vector<std::string>{"/usr/lib/system/libsystem_c.dylib", "/usr/lib/system/libsystem_m.dylib"});
  CHECK(file.libraries[1].install_name == "/usr/lib/system/libsystem_c.dylib");
  CHECK(file.libraries[1].exports("x86_64-macos") == std::vector<std::string>{"_printf", "_puts"});
  CHECK(file.libraries[2].exports("x86_64-macos").empty());
  CHECK(file.libraries[2].exports("arm64-macos") == std::vector<std::string>{"_sqrt"});
}

TEST_CASE("tbd v4: a target written by its platform number") {
  TbdFile file = parse_tbd("--- !tapi-tbd\ntbd-version: 4\ntargets: [ 'arm64-<1>', 'x86_64-<6>' ]\ninstall-name: /l.dylib\n"
                           "exports:\n  - targets: [ 'arm64-<1>' ]\n    symbols: [ _n ]\n...\n");
  CHECK(file.libraries[0].targets == targets({"arm64-macos", "x86_64-maccatalyst"}));
  CHECK(file.libraries[0].exports("arm64-macos") == std::vector<std::string>{"_n"});
}

TEST_CASE("tbd v5: JSON, a section's own targets honoured, others every target; inlined libraries") {
  TbdFile file = parse_tbd(kV5);
  REQUIRE(file.libraries.size() == 2);
  const TbdLibrary& five = file.libraries[0];
  CHECK(five.install_name == "/System/Library/Frameworks/Five.framework/Five");
  CHECK(five.targets == targets({"x86_64-macos", "arm64-macos"}));
  CHECK(five.current_version == 0x50403);
  CHECK(five.compatibility_version == 0x10100);
  std::vector<std::string> everywhere = {"_OBJC_CLASS_$_FiveClass", "_OBJC_EHTYPE_$_FiveError", "_OBJC_IVAR_$_FiveClass.value",
                                         "_OBJC_METACLASS_$_FiveClass", "_everywhere", "_tlv_five", "_weak_five"};
  std::vector<std::string> arm64 = everywhere;
  arm64.insert(arm64.begin() + 4, "_arm64_only");
  CHECK(five.exports("arm64-macos") == arm64);
  std::vector<std::string> x86_64 = everywhere;
  x86_64.insert(x86_64.begin() + 5, "_reexported_x86");
  CHECK(five.exports("x86_64-macos") == x86_64);
  CHECK(!has(five.exports("arm64-macos"), "_imported"));
  CHECK(five.reexported_libraries("x86_64-macos") == std::vector<std::string>{"/usr/lib/libeverywhere.dylib"});
  CHECK(five.reexported_libraries("arm64-macos") == std::vector<std::string>{"/usr/lib/libeverywhere.dylib", "/usr/lib/libarm.dylib"});
  const TbdLibrary& inlined = file.libraries[1];
  CHECK(inlined.install_name == "/usr/lib/libarm.dylib");
  CHECK(inlined.current_version == 0x10000);
  CHECK(inlined.exports("arm64-macos") == std::vector<std::string>{"_from_inlined"});

  // A version of five parts fits when the last two are 0 (parse64, not truncated).
  std::string five_parts = kV5;
  five_parts.replace(five_parts.find("5.4.3"), 5, "5.4.3.0.0");
  CHECK(parse_tbd(five_parts).libraries[0].current_version == 0x50403);
}

TEST_CASE("tbd: errors say what is wrong and on which line") {
  CHECK(problem_of("hello").find("not a text-based stub") != std::string::npos);
  // YAML that does not parse: the parser's line and column.
  CHECK(problem_of("--- !tapi-tbd\ntbd-version: 4\ntargets: [ arm64-macos\ninstall-name: x\n...\n").find("line ") == 0);
  std::string missing = problem_of("--- !tapi-tbd\ntbd-version: 4\ntargets: [ arm64-macos ]\n...\n");
  CHECK(missing.find("'install-name' is missing") != std::string::npos);
  CHECK(missing.find("line 1") == 0);
  // A wrong type, on the line of the value.
  std::string type = problem_of("--- !tapi-tbd\ntbd-version: 4\ntargets: [ arm64-macos ]\ninstall-name: /l.dylib\n"
                                "exports:\n  - targets: [ arm64-macos ]\n    symbols: { a: b }\n...\n");
  CHECK(type.find("line 7: symbols is not a list") == 0);
  CHECK(problem_of("--- !tapi-tbd\ntbd-version: 4\ntargets: [ arm64-macos ]\ninstall-name: [ /l.dylib ]\n...\n")
            .find("line 4: install-name is not a single value") == 0);
  CHECK(problem_of("--- !tapi-tbd\ntbd-version: 4\ntargets: [ arm64-macos ]\ninstall-name: /l.dylib\nexports: [ [ _a ] ]\n...\n")
            .find("an exports section is not a mapping") != std::string::npos);
  // An unknown or repeated key, as LLVM refuses it.
  CHECK(problem_of("--- !tapi-tbd\ntbd-version: 4\ntargets: [ arm64-macos ]\ninstall-name: /l.dylib\nexprots: []\n...\n")
            .find("line 5: unknown key 'exprots'") == 0);
  CHECK(problem_of("--- !tapi-tbd\ntbd-version: 4\ntargets: [ arm64-macos ]\ninstall-name: /l.dylib\ninstall-name: /m.dylib\n...\n")
            .find("line 5: key 'install-name' repeated") == 0);
  CHECK(problem_of("--- !tapi-tbd-v2\narchs: [ x86_64 ]\nplatform: macosx\ninstall-name: /l.dylib\n"
                   "exports:\n  - archs: [ x86_64 ]\n    objc-eh-types: [ E ]\n...\n")
            .find("unknown key 'objc-eh-types'") != std::string::npos);  // a v3 key
  // Values.
  CHECK(problem_of("--- !tapi-tbd\ntbd-version: 4\ntargets: [ arm64-macos ]\ninstall-name: /l.dylib\ncurrent-version: 1.256\n...\n")
            .find("line 5: current-version '1.256' is not a version") == 0);
  CHECK(problem_of("--- !tapi-tbd\ntbd-version: 4\ntargets: [ arm64-plan9 ]\ninstall-name: /l.dylib\n...\n")
            .find("'arm64-plan9' in targets is not a target") != std::string::npos);
  CHECK(problem_of("--- !tapi-tbd\ntbd-version: 5\ntargets: [ arm64-macos ]\ninstall-name: /l.dylib\n...\n")
            .find("tbd-version 4, not 5") != std::string::npos);
  CHECK(problem_of("--- !tapi-tbd-v2\narchs: [ x86_64 ]\nplatform: iosmac\ninstall-name: /l.dylib\n...\n")
            .find("unknown platform 'iosmac' for a tbd-v2 document") != std::string::npos);
  CHECK(problem_of("--- !tapi-tbd\ntbd-version: 4\ntargets: [ arm64-macos ]\ninstall-name: /l.dylib\n--- !other\na: b\n...\n")
            .find("line 5: a document tagged '!other'") == 0);
  CHECK(problem_of("--- !tapi-tbd\ntbd-version: 4\ntargets: [ arm64-macos ]\ninstall-name: /l.dylib\n---\n...\n")
            .find("document 2 is empty") != std::string::npos);

  // JSON: the parser's line, else the value's path.
  CHECK(problem_of("{\"tapi_tbd_version\": 5,\n \"main_library\": {,}}").find("line 2, column") == 0);
  CHECK(problem_of("{\"tapi_tbd_version\": 4, \"main_library\": {}}").find("tapi_tbd_version is not 5") != std::string::npos);
  CHECK(problem_of("{\"tapi_tbd_version\": 5}").find("main_library is missing") != std::string::npos);
  CHECK(problem_of("{\"tapi_tbd_version\": 5, \"main_library\": {\"target_info\": [{\"target\": \"arm64-macos\"}]}}")
            .find("main_library: install_names is missing") == 0);
  CHECK(problem_of("{\"tapi_tbd_version\": 5, \"main_library\": {\"target_info\": [{\"target\": \"arm64-macos\"}], "
                   "\"install_names\": [{\"name\": 7}]}}")
            .find("main_library: install_names[0]: name is not a string") == 0);
  std::string json = kV5;
  json.replace(json.find("[ \"_arm64_only\" ]"), 17, "\"_arm64_only\"");
  CHECK(problem_of(json).find("main_library: exported_symbols[1]: text: global is not an array of strings") == 0);
  json = kV5;
  json.replace(json.find("\"text\": { \"global\": [ \"_from_inlined\" ] }"), 41, "\"texts\": {}");
  CHECK(problem_of(json).find("libraries[0]: exported_symbols[0]: neither text nor data") == 0);
  json = kV5;
  json.replace(json.find("[ \"arm64-macos\" ], \"text\""), 17, "[ \"arm64\" ]");
  CHECK(problem_of(json).find("'arm64' is not a target") != std::string::npos);
}

// The keys LLVM's TextStub maps as required: without them the linker refuses the
// stub, and so must machofix; accepting it would make a library export nothing (no
// target, no architecture), and every import from it would be said not to bind.
TEST_CASE("tbd: a key the version requires is missing: an error naming the key, never a library without targets") {
  // v4: the document's targets, and those of each kind of section.
  std::string v4 = problem_of("--- !tapi-tbd\ntbd-version: 4\ninstall-name: /l.dylib\n"
                              "exports:\n  - targets: [ arm64-macos ]\n    symbols: [ _a ]\n...\n");
  CHECK(v4.find("line 1: 'targets' is missing from the tbd-version 4 document") == 0);
  CHECK(problem_of("--- !tapi-tbd\ntbd-version: 4\ntargets: [ arm64-macos ]\ninstall-name: /l.dylib\n"
                   "exports:\n  - symbols: [ _a ]\n...\n")
            .find("line 6: 'targets' is missing from an exports section") == 0);
  CHECK(problem_of("--- !tapi-tbd\ntbd-version: 4\ntargets: [ arm64-macos ]\ninstall-name: /l.dylib\n"
                   "reexports:\n  - symbols: [ _a ]\n...\n")
            .find("line 6: 'targets' is missing from a reexports section") == 0);
  CHECK(problem_of("--- !tapi-tbd\ntbd-version: 4\ntargets: [ arm64-macos ]\ninstall-name: /l.dylib\n"
                   "reexported-libraries:\n  - libraries: [ /usr/lib/libinner.dylib ]\n...\n")
            .find("line 6: 'targets' is missing from a reexported-libraries entry") == 0);
  // v1 to v3: the document's archs, and each exports section's.
  // (An untagged v1 document starts with archs, or the linker's test says it is no stub.)
  for (std::string version : {"1", "2", "3"}) {
    CAPTURE(version);
    std::string tag = "--- !tapi-tbd-v" + version + "\n";
    std::string document = problem_of(tag + "platform: macosx\ninstall-name: /l.dylib\n"
                                      "exports:\n  - archs: [ x86_64 ]\n    symbols: [ _a ]\n...\n");
    CHECK(document.find("line 1: 'archs' is missing from the tbd-v" + version + " document") == 0);
    CHECK(problem_of(tag + "archs: [ x86_64 ]\nplatform: macosx\ninstall-name: /l.dylib\n"
                     "exports:\n  - symbols: [ _a ]\n...\n")
              .find("'archs' is missing from an exports section") != std::string::npos);
  }
  // v5: the library's target_info, of the main library and of an inlined one.
  CHECK(problem_of("{\"tapi_tbd_version\": 5, \"main_library\": {\"install_names\": [{\"name\": \"/l.dylib\"}], "
                   "\"exported_symbols\": [{\"text\": {\"global\": [\"_a\"]}}]}}")
            .find("main_library: target_info is missing") == 0);
  CHECK(problem_of("{\"tapi_tbd_version\": 5, \"main_library\": {\"target_info\": [{\"target\": \"arm64-macos\"}], "
                   "\"install_names\": [{\"name\": \"/l.dylib\"}]}, "
                   "\"libraries\": [{\"install_names\": [{\"name\": \"/m.dylib\"}]}]}")
            .find("libraries[0]: target_info is missing") == 0);
  // Each stub above, with the key, is read, and exports _a.
  CHECK(parse_tbd("--- !tapi-tbd\ntbd-version: 4\ntargets: [ arm64-macos ]\ninstall-name: /l.dylib\n"
                  "exports:\n  - targets: [ arm64-macos ]\n    symbols: [ _a ]\n...\n")
            .libraries[0].exports("arm64-macos") == std::vector<std::string>{"_a"});
  CHECK(parse_tbd("--- !tapi-tbd-v3\narchs: [ x86_64 ]\nplatform: macosx\ninstall-name: /l.dylib\n"
                  "exports:\n  - archs: [ x86_64 ]\n    symbols: [ _a ]\n...\n")
            .libraries[0].exports("x86_64-macos") == std::vector<std::string>{"_a"});
  CHECK(parse_tbd("{\"tapi_tbd_version\": 5, \"main_library\": {\"target_info\": [{\"target\": \"arm64-macos\"}], "
                  "\"install_names\": [{\"name\": \"/l.dylib\"}], \"exported_symbols\": [{\"text\": {\"global\": [\"_a\"]}}]}}")
            .libraries[0].exports("arm64-macos") == std::vector<std::string>{"_a"});
}

TEST_CASE("tbd: broken input is an Error, never a crash") {
  // Every prefix of valid files, closed so that the linker's test passes, and
  // every single-byte change of the v4 stub at a stride.
  for (const char* base : {kV1, kV2, kV3, kV4}) {
    std::string text = base;
    for (size_t length = 0; length < text.size(); length += 7) {
      std::string cut = text.substr(0, length) + "\n...\n";
      try {
        parse_tbd(cut);
      } catch (const Error&) {
      }
    }
  }
  std::string v4 = kV4;
  for (size_t at = 0; at < v4.size(); at += 3) {
    for (char byte : {'[', ']', '{', ':', '-', '\'', '\0', '\t', '!', '&', '*'}) {
      std::string changed = v4;
      changed[at] = byte;
      try {
        parse_tbd(changed);
      } catch (const Error&) {
      }
    }
  }
  std::string v5 = kV5;
  for (size_t length = 1; length < v5.size(); length += 5) {
    try {
      parse_tbd(v5.substr(0, length) + "}");
    } catch (const Error&) {
    }
  }
  // Deep nesting: the parsers' depth limits, not the stack.
  std::string deep_yaml = "--- !tapi-tbd\ntbd-version: 4\ntargets: " + std::string(100000, '[') + "\n...\n";
  CHECK(thrown_as(ErrorKind::Malformed, [&] { parse_tbd(deep_yaml); }));
  std::string deep_json = "{\"tapi_tbd_version\": 5, \"main_library\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  CHECK(thrown_as(ErrorKind::Malformed, [&] { parse_tbd(deep_json); }));
}

// zig 0.11's libSystem stubs (derived from Apple's SDKs; scripts/build_release.sh
// fetches zig into the cache): a real v4 file with 35 inlined libraries.
TEST_CASE("tbd: zig's libSystem stubs, when cached: malloc and printf through libSystem's re-exports") {
  std::string cache;
  if (const char* dir = std::getenv("MACHOFIX_CACHE_DIR")) cache = dir;
  else if (const char* dir = std::getenv("XDG_CACHE_HOME")) cache = std::string(dir) + "/machofix";
  else if (const char* home = std::getenv("HOME")) cache = std::string(home) + "/.cache/machofix";
  std::filesystem::path darwin = std::filesystem::path(cache) / "release/zig-0.11.0/package/lib/libc/darwin";
  std::vector<std::filesystem::path> stubs;
  for (const char* name : {"libSystem.11.tbd", "libSystem.12.tbd", "libSystem.13.tbd"})
    if (std::filesystem::exists(darwin / name)) stubs.push_back(darwin / name);
  if (stubs.empty()) {
    MESSAGE("skipped: no zig 0.11 in " << darwin.string() << " (scripts/build_release.sh fetches it)");
    return;
  }
  for (const std::filesystem::path& path : stubs) {
    CAPTURE(path.string());
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    REQUIRE(looks_like_tbd(text.str()));
    TbdFile file = parse_tbd(text.str());
    REQUIRE(file.libraries.size() > 30);
    const TbdLibrary& system = file.libraries[0];
    CHECK(system.install_name == "/usr/lib/libSystem.B.dylib");
    for (const char* target : {"arm64-macos", "x86_64-macos"}) {
      CAPTURE(target);
      CHECK(system.has_target(target));
      // dyld finds an import of libSystem in libSystem or in a library it re-exports.
      auto supplier = [&](const std::string& symbol) -> std::string {
        if (has(system.exports(target), symbol)) return system.install_name;
        for (const std::string& name : system.reexported_libraries(target))
          for (const TbdLibrary& library : file.libraries)
            if (library.install_name == name && has(library.exports(target), symbol)) return name;
        return "";
      };
      CHECK(supplier("_malloc") == "/usr/lib/system/libsystem_malloc.dylib");
      CHECK(supplier("_printf") == "/usr/lib/system/libsystem_c.dylib");
      CHECK(supplier("_dlopen") == "/usr/lib/system/libdyld.dylib");
      CHECK(supplier("_no_such_function_anywhere").empty());
    }
  }
}
