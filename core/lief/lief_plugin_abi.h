// The C interface between machofix's core and its LIEF reader, a plugin.
//
// LIEF 0.9's static initialisers build hundreds of lookup maps when the library is
// loaded: 5 ms, more than `machofix verify` needs for a 1 MB file. Only the rewrite
// path needs LIEF (to re-read every output a second time), so LIEF lives in a module
// (machofix-lief.so) that core/lief/lief_check.cc loads with dlopen the first time it is
// needed. The interface is plain C so that nothing C++ (exceptions, std::string,
// allocations) crosses between the two, whatever runtime each was linked with.
//
// Version 2 (machofix_lief_read_v2): the image is handed as pieces (a skeleton of the
// slice: its load commands, a copy, and its __LINKEDIT, a view of the slice), and the
// binds of the dyld-info streams are reported too. Version 1 (one contiguous buffer; no
// binds) is gone: the plugin and the core are built and installed together, and a
// stale plugin is refused by name.
#pragma once

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// One piece of the image: `size` bytes at `data`. The pieces, in order and back to
// back, are the image LIEF reads (core/lief/lief_skeleton.h builds them); the plugin
// only reads them (it joins them into the one buffer LIEF 0.9's parser wants).
struct MachofixLiefPiece {
  const uint8_t* data;
  uint64_t size;
};

// The three dyld-info bind streams, as LIEF 0.9 reads them.
enum MachofixLiefBindClass {
  MACHOFIX_LIEF_BIND_STANDARD = 1,  // bind_off/bind_size
  MACHOFIX_LIEF_BIND_WEAK = 2,      // weak_bind_off/weak_bind_size (no ordinal: LIEF reports 0)
  MACHOFIX_LIEF_BIND_LAZY = 3,      // lazy_bind_off/lazy_bind_size
};

// What the plugin reports while it reads one thin Mach-O image. The callbacks
// only record; they never fail.
struct MachofixLiefVisitorV2 {
  void* context;
  // Each load command in order; dylib_name is the install name of a command LIEF
  // reads as a dylib command (LC_ID_DYLIB, LC_LOAD_DYLIB and its kin), else NULL.
  void (*command)(void* context, uint32_t cmd, uint64_t offset, uint32_t size, const char* dylib_name);
  // Each entry of the LC_SYMTAB symbol table, in order, as LIEF reads it (not the
  // symbols LIEF makes up for exports-trie entries).
  void (*symbol)(void* context, const char* name, uint8_t type, uint16_t description, uint64_t value);
  // Each bind LIEF reads (one per bound address), in stream order. symbol_name is
  // NULL when LIEF ties the bind to no symbol (LIEF 0.9 names a bind only through
  // a symbol-table entry of that name).
  void (*bind)(void* context, uint32_t bind_class, int32_t library_ordinal, const char* symbol_name,
               int weak_import);
  // 0: do not read the dyld-info streams at all (no bind is reported). LIEF 0.9
  // expands every bound address and searches its symbols for each: quadratic, and
  // minutes for a crafted 94 KB file.
  int read_binds;
};

// Reads the image made of pieces[0, count) with LIEF and reports it to visitor.
// Returns 0 when LIEF read one image; otherwise writes why (NUL-terminated,
// truncated) to error and returns 1. Not thread-safe: LIEF 0.9 keeps global state;
// the caller serialises calls.
typedef int (*MachofixLiefReadV2)(const struct MachofixLiefPiece* pieces, size_t count,
                                  const struct MachofixLiefVisitorV2* visitor, char* error, size_t error_size);

#define MACHOFIX_LIEF_READ_SYMBOL "machofix_lief_read_v2"
#define MACHOFIX_LIEF_PLUGIN_NAME "machofix-lief.so"

#ifdef __cplusplus
}
#endif
