// dyld's search and binding (core/app/dyld.h) on processes built by hand: each rule of
// docs/app-check.md on the smallest images that show it. Real files, a real linker and
// a real application are tests/app's; these pin the order and the corner cases.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "core/app/dyld.h"
#include "core/format/macho_format.h"

using namespace machofix;

namespace {

Dylib dependency(int ordinal, const std::string& install_name, DylibKind kind = DylibKind::Load) {
  Dylib dylib;
  dylib.ordinal = ordinal;
  dylib.install_name = install_name;
  dylib.kind = kind;
  return dylib;
}

// A process under construction: images by hand, kept alive here.
struct Scene {
  std::vector<std::unique_ptr<LibraryImage>> kept;
  Process process;
  LibraryFiles files;
  SearchRoots roots;

  explicit Scene(std::string app_root = "/app") {
    roots.app = std::move(app_root);
    process.arch = "arm64";
    process.executable_directory = roots.app + "/Contents/MacOS";
  }

  LibraryImage& image(std::string install_name = "") {
    kept.push_back(std::make_unique<LibraryImage>());
    kept.back()->install_name = std::move(install_name);
    kept.back()->filetype = macho::MH_DYLIB;
    return *kept.back();
  }

  size_t add(const std::string& path, LibraryImage* image, std::optional<size_t> loaded_by = std::nullopt) {
    ProcessImage added;
    added.path = path;
    added.image = image;
    if (image) added.dependents.resize(image->dependencies.size());
    added.loaded_by = loaded_by;
    process.images.push_back(std::move(added));
    return process.images.size() - 1;
  }

  Dyld dyld() { return Dyld(process, files, roots); }
};

void exports(LibraryImage& image, std::initializer_list<const char*> names) {
  for (const char* name : names) image.exports.names.emplace(name, Export{});
}

BuildTarget macos(uint32_t sdk_major) { return {kPlatformMacOS, 11u << 16, sdk_major << 16, 0}; }

}  // namespace

TEST_CASE("@rpath: an image already loaded under that install name, whatever the rpaths") {
  Scene scene;
  LibraryImage& executable = scene.image();
  executable.filetype = macho::MH_EXECUTE;
  scene.add("/app/Contents/MacOS/App", &executable);
  LibraryImage& omp = scene.image("@rpath/libomp.dylib");
  scene.add("/app/Contents/Frameworks/libomp.dylib", &omp, 0);
  LibraryImage& model = scene.image();
  model.dependencies = {dependency(1, "@rpath/libomp.dylib")};
  size_t index = scene.add("<temporary directory>/model.so", &model);
  std::vector<DependencyOutcome> outcomes = scene.dyld().load_dependents(index);
  REQUIRE(outcomes.size() == 1);
  CHECK(outcomes[0].resolved == "/app/Contents/Frameworks/libomp.dylib");
  CHECK(scene.process.missing.empty());
}

TEST_CASE("an absolute dependency is the loaded image with that install name (PyTorch's libomp shipped in the app)") {
  Scene scene;
  scene.add("/app/Contents/MacOS/App", &scene.image());
  scene.add("/app/Contents/Frameworks/libomp.dylib", &scene.image("/opt/llvm-openmp/lib/libomp.dylib"), 0);
  LibraryImage& model = scene.image();
  model.dependencies = {dependency(1, "/opt/llvm-openmp/lib/libomp.dylib")};
  size_t index = scene.add("<temporary directory>/model.so", &model);
  CHECK(scene.dyld().load_dependents(index)[0].resolved == "/app/Contents/Frameworks/libomp.dylib");
}

TEST_CASE("@rpath: the requester's rpaths, then up its load chain, then the executable's; every path tried") {
  std::filesystem::path root = std::filesystem::temp_directory_path() / "machofix-dyld-rpath";
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root / "Contents/MacOS");
  Scene scene(root.string());
  LibraryImage& executable = scene.image();
  executable.rpaths = {"@executable_path/../Frameworks", "/opt/build/lib"};
  scene.add(root.string() + "/Contents/MacOS/App", &executable);
  LibraryImage& model = scene.image();
  model.rpaths = {"@loader_path", "@loader_path/../lib", "relative/dir"};
  model.build_targets = {macos(14)};  // no fallback paths
  model.dependencies = {dependency(1, "@rpath/libomp.dylib"), dependency(2, "@rpath/libweak.dylib", DylibKind::Weak)};
  size_t index = scene.add("<temporary directory>/model.so", &model);
  std::vector<DependencyOutcome> outcomes = scene.dyld().load_dependents(index);
  REQUIRE(scene.process.missing.size() == 1);  // the weak one may be missing
  const MissingLibrary& missing = scene.process.missing[0];
  CHECK(missing.install_name == "@rpath/libomp.dylib");
  CHECK(missing.needed_by == index);
  REQUIRE(missing.tried.size() == 4);  // the relative rpath is skipped
  CHECK(missing.tried[0].path == "<temporary directory>/libomp.dylib");
  CHECK(missing.tried[1].path == "<temporary directory>/../lib/libomp.dylib");
  CHECK(missing.tried[2].path == root.string() + "/Contents/Frameworks/libomp.dylib");  // dyld folds ".."
  CHECK(missing.tried[2].reason == "no such file");
  CHECK(missing.tried[3].path == "/opt/build/lib/libomp.dylib");
  CHECK_FALSE(outcomes[1].resolved);
  std::filesystem::remove_all(root);
}

// A dependency of a library the model loaded (not of the model itself): its @rpath
// searches the library's own rpaths, then the model's (the image that loaded it),
// then the executable's, each @loader_path expanded from the image that declares it;
// its @loader_path/ is its own directory, its @executable_path/ the executable's.
TEST_CASE("the load chain: a library's dependencies, rpaths inherited from the model and the executable") {
  Scene scene;
  LibraryImage& executable = scene.image();
  executable.rpaths = {"@executable_path/../Frameworks"};
  scene.add("/app/Contents/MacOS/App", &executable);
  LibraryImage& model = scene.image();
  model.rpaths = {"@loader_path/deps", "/opt/model/lib"};
  size_t model_index = scene.add("<temporary directory>/model.so", &model);
  LibraryImage& middle = scene.image("@rpath/libmiddle.dylib");
  middle.rpaths = {"@loader_path/inner"};
  middle.build_targets = {macos(14)};  // no fallback paths
  middle.dependencies = {dependency(1, "@rpath/libdeep.dylib"), dependency(2, "@loader_path/libnext.dylib"),
                         dependency(3, "@executable_path/../Helpers/libhelper.dylib")};
  size_t middle_index = scene.add("/app/Contents/Resources/lib/libmiddle.dylib", &middle, model_index);
  scene.dyld().load_dependents(middle_index);
  REQUIRE(scene.process.missing.size() == 3);
  for (const MissingLibrary& missing : scene.process.missing) CHECK(missing.needed_by == middle_index);
  std::vector<std::string> deep;
  for (const TriedPath& tried : scene.process.missing[0].tried) deep.push_back(tried.path);
  CHECK(deep == std::vector<std::string>{"/app/Contents/Resources/lib/inner/libdeep.dylib",  // its own rpath
                                         "<temporary directory>/deps/libdeep.dylib",         // the model's, from the model
                                         "/opt/model/lib/libdeep.dylib",
                                         "/app/Contents/Frameworks/libdeep.dylib"});         // the executable's
  REQUIRE(scene.process.missing[1].tried.size() == 1);
  CHECK(scene.process.missing[1].tried[0].path == "/app/Contents/Resources/lib/libnext.dylib");
  REQUIRE(scene.process.missing[2].tried.size() == 1);
  CHECK(scene.process.missing[2].tried[0].path == "/app/Contents/Helpers/libhelper.dylib");
}

TEST_CASE("@rpath with no LC_RPATH anywhere: dyld's words") {
  Scene scene;
  scene.add("/app/Contents/MacOS/App", &scene.image());
  LibraryImage& model = scene.image();
  model.build_targets = {macos(15)};
  model.dependencies = {dependency(1, "@rpath/libfoo.dylib")};
  scene.dyld().load_dependents(scene.add("<temporary directory>/model.so", &model));
  REQUIRE(scene.process.missing.size() == 1);
  REQUIRE(scene.process.missing[0].tried.size() == 1);
  CHECK(scene.process.missing[0].tried[0].reason == "no LC_RPATH's found");
}

TEST_CASE("system paths without a sysroot: present if named, never as a fallback") {
  Scene scene;
  scene.add("/app/Contents/MacOS/App", &scene.image());
  LibraryImage& old_model = scene.image();  // linked against the macOS 13 SDK: gets the fallbacks
  old_model.build_targets = {macos(13)};
  old_model.dependencies = {dependency(1, "/usr/lib/libSystem.B.dylib"), dependency(2, "/opt/llvm-openmp/lib/libomp.dylib")};
  size_t index = scene.add("<temporary directory>/model.so", &old_model);
  std::vector<DependencyOutcome> outcomes = scene.dyld().load_dependents(index);
  CHECK(outcomes[0].system_assumed);
  REQUIRE(scene.process.missing.size() == 1);
  const std::vector<TriedPath>& tried = scene.process.missing[0].tried;
  REQUIRE(tried.size() == 3);
  CHECK(tried[0].path == "/opt/llvm-openmp/lib/libomp.dylib");
  CHECK(tried[0].reason == "no such file");
  CHECK(tried[1].path == "/usr/local/lib/libomp.dylib");
  CHECK(tried[2].path == "/usr/lib/libomp.dylib");
  CHECK(tried[2].reason == "not looked up (no --sysroot), so not taken as present");

  Scene modern;
  modern.add("/app/Contents/MacOS/App", &modern.image());
  LibraryImage& new_model = modern.image();  // the macOS 14 SDK or later: no fallbacks
  new_model.build_targets = {macos(14)};
  new_model.dependencies = {dependency(1, "/opt/llvm-openmp/lib/libomp.dylib")};
  modern.dyld().load_dependents(modern.add("<temporary directory>/model.so", &new_model));
  REQUIRE(modern.process.missing.size() == 1);
  CHECK(modern.process.missing[0].tried.size() == 1);
}

TEST_CASE("framework fallbacks use the framework's partial path") {
  Scene scene;
  scene.add("/app/Contents/MacOS/App", &scene.image());
  LibraryImage& model = scene.image();
  model.dependencies = {dependency(1, "/build/Foo.framework/Versions/A/Foo")};
  scene.dyld().load_dependents(scene.add("<temporary directory>/model.so", &model));  // no build version: pre-2022
  const std::vector<TriedPath>& tried = scene.process.missing.at(0).tried;
  REQUIRE(tried.size() == 3);
  CHECK(tried[1].path == "/Library/Frameworks/Foo.framework/Versions/A/Foo");
  CHECK(tried[2].path == "/System/Library/Frameworks/Foo.framework/Versions/A/Foo");
}

TEST_CASE("binding: two-level through re-exports, renamed re-exports, cycles") {
  Scene scene;
  scene.add("/app/Contents/MacOS/App", &scene.image());
  LibraryImage& inner = scene.image("@rpath/libinner.dylib");
  exports(inner, {"_inner", "_real"});
  LibraryImage& outer = scene.image("@rpath/libouter.dylib");
  outer.dependencies = {dependency(1, "@rpath/libinner.dylib", DylibKind::Reexport),
                        dependency(2, "@rpath/libouter.dylib", DylibKind::Reexport)};  // itself: a cycle
  outer.exports.names.emplace("_alias", Export{true, 1, "_real"});
  outer.exports.names.emplace("_broken", Export{true, 5, ""});
  size_t inner_index = scene.add("/app/libinner.dylib", &inner, 0);
  size_t outer_index = scene.add("/app/libouter.dylib", &outer, 0);
  scene.process.images[outer_index].dependents = {inner_index, outer_index};
  LibraryImage& model = scene.image();
  model.dependencies = {dependency(1, "@rpath/libouter.dylib")};
  model.imports = {{"_inner", 1, false, false}, {"_alias", 1, false, false}, {"_broken", 1, false, false},
                   {"_nowhere", 1, false, true}, {"_optional", 1, true, false}};
  model.exports_known = false;
  size_t index = scene.add("<temporary directory>/model.so", &model);
  scene.process.images[index].dependents = {outer_index};
  std::vector<BindingOutcome> bindings = scene.dyld().bind(index);
  REQUIRE(bindings.size() == 5);
  CHECK(bindings[0].verdict == BindVerdict::Bound);
  CHECK(bindings[0].found_in == "/app/libinner.dylib");
  CHECK(bindings[1].verdict == BindVerdict::Bound);  // _alias is _real in libinner
  CHECK(bindings[2].verdict == BindVerdict::Missing);  // a re-export ordinal out of range
  CHECK(bindings[3].verdict == BindVerdict::Missing);
  CHECK(bindings[3].lazy);
  CHECK(bindings[3].expected_in == "/app/libouter.dylib");
  CHECK(bindings[4].verdict == BindVerdict::WeakMissing);
}

// A flat lookup that meets a re-export entry in an image's export trie follows it,
// as a two-level one does: the symbol is bound where the re-export leads, under the
// name it gives; the re-exporting image defines nothing.
TEST_CASE("binding: a flat lookup follows the re-export entries of an export trie") {
  Scene scene;
  scene.add("/app/Contents/MacOS/App", &scene.image());
  LibraryImage& inner = scene.image("@rpath/libinner.dylib");
  exports(inner, {"_real", "_same"});
  LibraryImage& outer = scene.image("@rpath/libouter.dylib");
  outer.dependencies = {dependency(1, "@rpath/libinner.dylib")};  // an ordinary dependency: the trie re-exports
  outer.exports.names.emplace("_same", Export{true, 1, ""});
  outer.exports.names.emplace("_renamed", Export{true, 1, "_real"});
  outer.exports.names.emplace("_dangling", Export{true, 1, "_nowhere"});
  size_t outer_index = scene.add("/app/libouter.dylib", &outer, 0);
  size_t inner_index = scene.add("/app/libinner.dylib", &inner, outer_index);
  scene.process.images[outer_index].dependents = {inner_index};
  LibraryImage& model = scene.image();
  // Flat lookups from a two-level image, as -undefined dynamic_lookup makes them.
  model.imports = {{"_same", macho::BIND_SPECIAL_DYLIB_FLAT_LOOKUP, false, false},
                   {"_renamed", macho::BIND_SPECIAL_DYLIB_FLAT_LOOKUP, false, true},
                   {"_dangling", macho::BIND_SPECIAL_DYLIB_FLAT_LOOKUP, false, false}};
  model.exports_known = false;
  size_t index = scene.add("<temporary directory>/model.so", &model);
  std::vector<BindingOutcome> bindings = scene.dyld().bind(index);
  REQUIRE(bindings.size() == 3);
  CHECK(bindings[0].verdict == BindVerdict::Bound);
  CHECK(bindings[0].found_in == "/app/libinner.dylib");
  CHECK(bindings[1].verdict == BindVerdict::Bound);
  CHECK(bindings[1].found_in == "/app/libinner.dylib");
  CHECK(bindings[1].library == "flat namespace");
  CHECK(bindings[2].verdict == BindVerdict::Missing);  // the re-export leads nowhere, and no image defines it
}

// A model linked -flat_namespace binds even its own exported functions through flat
// lookups, and check --app does not read a model's exports: a flat lookup nothing
// else answers may be the model's own definition (unchecked, never a finding). A
// two-level model's flat lookups (-undefined dynamic_lookup) are its imports only.
TEST_CASE("binding: a -flat_namespace model's flat lookups may be its own definitions") {
  for (bool two_level : {false, true}) {
    CAPTURE(two_level);
    Scene scene;
    scene.add("/app/Contents/MacOS/App", &scene.image());
    LibraryImage& model = scene.image();
    model.two_level = two_level;
    model.exports_known = false;
    model.imports = {{"_model_own_function", macho::BIND_SPECIAL_DYLIB_FLAT_LOOKUP, false, false}};
    size_t index = scene.add("<temporary directory>/model.so", &model);
    scene.process.images[index].hidden_from_flat = true;
    std::vector<BindingOutcome> bindings = scene.dyld().bind(index);
    REQUIRE(bindings.size() == 1);
    CHECK(bindings[0].verdict == (two_level ? BindVerdict::Missing : BindVerdict::Unchecked));
  }
}

TEST_CASE("binding: flat lookups in load order, the RTLD_LOCAL model hidden from others; missing libraries") {
  Scene scene;
  LibraryImage& executable = scene.image();
  executable.filetype = macho::MH_EXECUTE;
  exports(executable, {"_napi_create_object"});
  scene.add("/app/node", &executable);
  scene.add("/usr/lib/libSystem.B.dylib", nullptr, 0);  // taken as present: exports unknown
  LibraryImage& model = scene.image();
  model.dependencies = {dependency(1, "@rpath/libgone.dylib"), dependency(2, "@rpath/libweak.dylib", DylibKind::Weak)};
  model.imports = {{"_napi_create_object", macho::BIND_SPECIAL_DYLIB_FLAT_LOOKUP, false, false},
                   {"_unknown_anywhere", macho::BIND_SPECIAL_DYLIB_FLAT_LOOKUP, false, false},
                   {"_gone", 1, false, false},
                   {"_weak_strong", 2, false, false},
                   {"_weak_weak", 2, true, false},
                   {"_self", 0, false, false}};
  model.exports_known = false;
  size_t index = scene.add("<temporary directory>/model.so", &model);
  scene.process.images[index].hidden_from_flat = true;
  std::vector<BindingOutcome> bindings = scene.dyld().bind(index);
  REQUIRE(bindings.size() == 6);
  CHECK(bindings[0].verdict == BindVerdict::Bound);
  CHECK(bindings[0].found_in == "/app/node");
  CHECK(bindings[1].verdict == BindVerdict::Unchecked);  // libSystem might export it
  CHECK(bindings[2].verdict == BindVerdict::NotLoaded);
  CHECK(bindings[3].verdict == BindVerdict::Missing);  // dyld: "Expected in: unknown"
  CHECK(bindings[4].verdict == BindVerdict::WeakMissing);
  CHECK(bindings[5].verdict == BindVerdict::Unchecked);

  // Without libSystem taken as present, a flat miss is a miss; a second RTLD_LOCAL image
  // is not searched by the model, but is by itself.
  Scene bare;
  LibraryImage& app = bare.image();
  bare.add("/app/node", &app);
  LibraryImage& other = bare.image();
  exports(other, {"_in_other"});
  size_t other_index = bare.add("<temporary directory>/other.so", &other);
  bare.process.images[other_index].hidden_from_flat = true;
  LibraryImage& importer = bare.image();
  exports(importer, {"_own"});
  importer.imports = {{"_in_other", macho::BIND_SPECIAL_DYLIB_FLAT_LOOKUP, false, false},
                      {"_own", macho::BIND_SPECIAL_DYLIB_FLAT_LOOKUP, false, false}};
  size_t importer_index = bare.add("<temporary directory>/model.so", &importer);
  bare.process.images[importer_index].hidden_from_flat = true;
  std::vector<BindingOutcome> flat = bare.dyld().bind(importer_index);
  CHECK(flat[0].verdict == BindVerdict::Missing);
  CHECK(flat[1].verdict == BindVerdict::Bound);
}
