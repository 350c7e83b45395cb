#include "core/app/plist_library.h"

#include "core/base/error.h"

#ifdef MACHOFIX_PLIST_SONAME
#include <dlfcn.h>
#endif

namespace machofix {

namespace {

#ifdef MACHOFIX_PLIST_SONAME

// Debian's libplist 2.2, whose soname this is: its functions have these types (from
// 2.3 on, with another soname, the parsers return an error code).
template <typename Function>
void resolve(void* library, const char* name, Function*& function) {
  function = reinterpret_cast<Function*>(dlsym(library, name));
  if (!function)
    fail_as(ErrorKind::System, std::string(MACHOFIX_PLIST_SONAME) + " has no function " + name + ": not the libplist 2.2 machofix was built for");
}

PlistFunctions load() {
  // Never unloaded: the functions are used until the process ends.
  void* library = dlopen(MACHOFIX_PLIST_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (!library) {
    const char* reason = dlerror();
    fail_as(ErrorKind::System, std::string("reading an Info.plist needs libplist: cannot load " MACHOFIX_PLIST_SONAME " (") +
                                   (reason ? reason : "unknown reason") + "); on Debian: apt-get install libplist3");
  }
  PlistFunctions functions{};
  resolve(library, "plist_is_binary", functions.is_binary);
  resolve(library, "plist_from_bin", functions.from_bin);
  resolve(library, "plist_from_xml", functions.from_xml);
  resolve(library, "plist_get_node_type", functions.node_type);
  resolve(library, "plist_dict_get_item", functions.dict_item);
  resolve(library, "plist_get_string_ptr", functions.string_ptr);
  resolve(library, "plist_free", functions.free);
  return functions;
}

#else

// Linked: lambdas, so that the parsers' return type (void up to 2.2, an error code
// from 2.3 on, as Homebrew's is) does not matter; a parse that fails leaves nullptr.
PlistFunctions load() {
  return PlistFunctions{
      [](const char* data, uint32_t length) { return plist_is_binary(data, length); },
      [](const char* data, uint32_t length, plist_t* plist) { plist_from_bin(data, length, plist); },
      [](const char* data, uint32_t length, plist_t* plist) { plist_from_xml(data, length, plist); },
      [](plist_t node) { return plist_get_node_type(node); },
      [](plist_t dict, const char* key) { return plist_dict_get_item(dict, key); },
      [](plist_t node, uint64_t* length) { return plist_get_string_ptr(node, length); },
      [](plist_t plist) { plist_free(plist); },
  };
}

#endif

}  // namespace

const PlistFunctions& plist_functions() {
  // A load that throws leaves the static uninitialised: the next call tries again.
  static const PlistFunctions functions = load();
  return functions;
}

}  // namespace machofix
