# Wraps LIEF 0.9.0's cmake/LIEFDependencies.cmake when scripts/build_lief.sh builds it
# (this directory comes first on CMAKE_MODULE_PATH: scripts/lief/options.cmake).
#
# LIEF's own module unpacks its dependencies and lists every C file of mbed TLS as a
# source of the library, for the PE format's Authenticode signatures. Built with
# the Mach-O reader alone, the library uses one function of mbed TLS: the SHA-256 of
# LIEF::Hash (src/visitors/hash.cpp). Only its file is compiled, 1 of 71 C files:
# the others define the same static functions, which kept LIEF from a unity build
# (options.cmake). mbed TLS's headers stay where LIEF's module put them.
include("${CMAKE_CURRENT_SOURCE_DIR}/cmake/LIEFDependencies.cmake")
if(LIEF_PE)
  message(FATAL_ERROR "scripts/lief/LIEFDependencies.cmake drops mbed TLS's sources, which LIEF's PE format needs")
endif()
set(mbedtls_src_crypto "${MBEDTLS_SOURCE_DIR}/library/sha256.c")
set(mbedtls_src_x509)
set(mbedtls_src_tls)
