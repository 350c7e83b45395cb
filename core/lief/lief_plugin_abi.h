// The C interface between machofix's core and its LIEF reader, a plugin.
//
// LIEF 0.9's static initialisers build hundreds of lookup maps when the library is
// loaded: 5 ms, more than `machofix verify` needs for a 1 MB file. Only the rewrite
// path needs LIEF (to re-read every output a second time), so LIEF lives in a module
// (machofix-lief.so) that core/lief/lief_check.cc loads with dlopen the first time it is
// needed. The interface is plain C so that nothing C++ (exceptions, std::string,
// allocations) crosses between the two, whatever runtime each was linked with.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// What the plugin reports while it reads one thin Mach-O image. The callbacks
// only record; they never fail.
struct MachofixLiefVisitor {
  void* context;
  // Each load command in order; dylib_name is the install name of a command LIEF
  // reads as a dylib command (LC_ID_DYLIB, LC_LOAD_DYLIB and its kin), else NULL.
  void (*command)(void* context, uint32_t cmd, uint64_t offset, uint32_t size, const char* dylib_name);
  // Each symbol table entry, as LIEF reads it.
  void (*symbol)(void* context, const char* name, uint8_t type, uint16_t description, uint64_t value);
};

// Reads data[0, size) with LIEF and reports it to visitor. Returns 0 when LIEF read
// one image; otherwise writes why (NUL-terminated, truncated) to error and returns 1.
// Not thread-safe: LIEF 0.9 keeps global state; the caller serialises calls.
typedef int (*MachofixLiefRead)(const uint8_t* data, size_t size, const struct MachofixLiefVisitor* visitor,
                                char* error, size_t error_size);

#define MACHOFIX_LIEF_READ_SYMBOL "machofix_lief_read_v1"
#define MACHOFIX_LIEF_PLUGIN_NAME "machofix-lief.so"

#ifdef __cplusplus
}
#endif
