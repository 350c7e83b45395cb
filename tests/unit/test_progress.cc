// Progress: when the line appears (tool/progress.h) and how core counts the bytes
// of one file (core/base/progress.h).
#include <doctest/doctest.h>

#include <algorithm>
#include <mutex>
#include <thread>
#include <vector>

#include "core/base/progress.h"
#include "tool/progress.h"

using namespace machofix;

TEST_CASE("progress line: only for a run expected to last more than about a second") {
  using cli::expected_to_take_long;
  CHECK_FALSE(expected_to_take_long(0.05, 0.0));   // too early to tell
  CHECK_FALSE(expected_to_take_long(0.19, 0.01));  // even at a slow rate
  CHECK(expected_to_take_long(0.25, 0.0));         // nothing done yet: long
  CHECK(expected_to_take_long(0.25, 0.2));         // 1.25 s expected
  CHECK_FALSE(expected_to_take_long(0.25, 0.5));   // 0.5 s expected
  CHECK_FALSE(expected_to_take_long(0.9, 0.95));
  CHECK(expected_to_take_long(1.0, 0.99));  // it has lasted a second already
}

TEST_CASE("ProgressMeter: the sum of what several threads did, every few MiB, never past the total") {
  std::mutex mutex;
  std::vector<uint64_t> reports;
  const uint64_t total = 64ull << 20;
  ProgressMeter meter([&](uint64_t done, uint64_t of) {
    CHECK(of == total);
    std::lock_guard<std::mutex> lock(mutex);
    reports.push_back(done);
  }, total);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 1024; ++i) meter.add(20 << 10);  // 20 MiB each, 80 MiB in all: more than the total
    });
  for (std::thread& thread : threads) thread.join();
  // A report per 1% of the total (here less than 4 MiB): 80 MiB added, 64 MiB reported.
  REQUIRE(reports.size() >= 99);
  CHECK(reports.size() <= 80 * 100 / 64 + 1);  // not on every add (4096 of them)
  for (uint64_t done : reports) CHECK(done <= total);
  CHECK(*std::max_element(reports.begin(), reports.end()) == total);
}

TEST_CASE("ProgressMeter without a callback counts nothing and calls nothing") {
  ProgressMeter meter({}, 100);
  meter.add(1000);  // must not throw std::bad_function_call
}
