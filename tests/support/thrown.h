// The Error a call throws, for tests that assert its kind and offset rather than its
// words (the tests of messages match the words).
#pragma once

#include <doctest/doctest.h>

#include <optional>

#include "core/base/error.h"

namespace machofix::test {

template <typename Call>
std::optional<Error> thrown(Call&& call) {
  try {
    call();
  } catch (const Error& error) {
    return error;
  }
  return std::nullopt;
}

// Checks that `call` throws an Error of `kind`; the Error, for further checks.
template <typename Call>
std::optional<Error> thrown_as(ErrorKind kind, Call&& call) {
  std::optional<Error> error = thrown(call);
  REQUIRE_MESSAGE(error, "no Error thrown");
  CHECK(static_cast<int>(error->kind()) == static_cast<int>(kind));
  return error;
}

}  // namespace machofix::test
