# LIEF 0.9.0 as machofix builds it: the Mach-O reader only, one static library,
# position-independent (it goes into the reader plugin, a shared module). An initial
# cache (cmake -C scripts/lief/options.cmake), read by scripts/build_lief.sh and by
# the Homebrew formula, so that both configure LIEF alike.
foreach(format ELF PE OAT DEX VDEX ART)
  set(LIEF_${format} OFF CACHE BOOL "")
endforeach()
foreach(part PYTHON_API C_API EXAMPLES TESTS DOC SHARED_LIB ENABLE_JSON USE_CCACHE)
  set(LIEF_${part} OFF CACHE BOOL "")
endforeach()
set(CMAKE_POSITION_INDEPENDENT_CODE ON CACHE BOOL "")
# Each function and datum in a section of its own, so that the plugin's link keeps
# only what the Mach-O reader reaches: 25% less code, and no LIEF::Section::entropy,
# the only caller of libm (log2), which the plugin then loads without (BENCHMARKS.md).
# CMake's Release flags otherwise.
set(CMAKE_C_FLAGS_RELEASE "-O3 -DNDEBUG -ffunction-sections -fdata-sections" CACHE STRING "")
set(CMAKE_CXX_FLAGS_RELEASE "-O3 -DNDEBUG -ffunction-sections -fdata-sections" CACHE STRING "")
# One compile per batch of files (LIEFDependencies.cmake beside this file leaves out
# the mbed TLS sources whose static functions collide), and no easylogging++: its
# header is in nearly every file, and the reader plugin turns LIEF's logging off in
# any case (the Mach-O reader's log statements have no side effects, and none of them
# aborts). For linux-x86_64 with zig, LIEF's build went from 162 to 57 core-seconds
# (89 s to 37 s on 2 cores), a little over a minute a target.
set(CMAKE_UNITY_BUILD ON CACHE BOOL "")
set(LIEF_LOGGING OFF CACHE BOOL "")
# LIEFGit.cmake beside this file comes first: the version without git.
set(CMAKE_MODULE_PATH "${CMAKE_CURRENT_LIST_DIR}" CACHE PATH "")
