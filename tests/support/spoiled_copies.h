// A faulty copy, for the unit tests of the writers: flips one byte of the output once
// a copied chunk that holds it is handed to the CopyChecker (the proof seam's Copy
// step), so that the comparison behind the copy must find it.
#pragma once

#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "core/base/proof_seam.h"

namespace machofix::test {

inline uint64_t spoiled_at = 0;

inline void spoil_copied_chunk(seam::ProofStep step, const std::string& path, uint64_t offset, uint64_t length) {
  if (step != seam::ProofStep::Copy || spoiled_at < offset || spoiled_at >= offset + length) return;
  int fd = ::open(path.c_str(), O_RDWR);
  REQUIRE(fd >= 0);
  uint8_t byte = 0;
  REQUIRE(::pread(fd, &byte, 1, static_cast<off_t>(spoiled_at)) == 1);
  byte ^= 0xff;
  REQUIRE(::pwrite(fd, &byte, 1, static_cast<off_t>(spoiled_at)) == 1);
  ::close(fd);
}

// Spoils output offset `at` of every copy made while the object lives.
struct SpoiledCopies {
  explicit SpoiledCopies(uint64_t at) {
    spoiled_at = at;
    seam::install(nullptr, spoil_copied_chunk);
  }
  ~SpoiledCopies() { seam::install(nullptr, nullptr); }
  SpoiledCopies(const SpoiledCopies&) = delete;
  SpoiledCopies& operator=(const SpoiledCopies&) = delete;
};

}  // namespace machofix::test
