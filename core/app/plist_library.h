// The functions of libplist (libimobiledevice's property-list library, XML and binary)
// that core/app reads an Info.plist with, linked or loaded.
//
// A build that links its dependencies statically (MACHOFIX_STATIC_DEPS) links
// libplist's static archive where there is one (the macOS cross-build makes one).
// Debian ships none, and the executable of a static build must need nothing but
// glibc (the Python package's wheel carries it to machines without libplist), so there
// libplist is loaded by its soname the first time a bundle is read
// (MACHOFIX_PLIST_SONAME): only `check --app` on a bundle needs it.
#pragma once

#include <plist/plist.h>

#include <cstdint>

namespace machofix {

struct PlistFunctions {
  int (*is_binary)(const char* data, uint32_t length);
  // The parsed list in *plist, or nullptr when `data` is not one.
  void (*from_bin)(const char* data, uint32_t length, plist_t* plist);
  void (*from_xml)(const char* data, uint32_t length, plist_t* plist);
  plist_type (*node_type)(plist_t node);
  plist_t (*dict_item)(plist_t dict, const char* key);
  const char* (*string_ptr)(plist_t node, uint64_t* length);
  void (*free)(plist_t plist);
};

// libplist's functions; the first call of a build that loads it loads it, and throws
// an Error of kind System naming the library when it cannot.
const PlistFunctions& plist_functions();

}  // namespace machofix
