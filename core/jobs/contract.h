// The portability contract: what an application declares about the libraries it
// ships, written by hand in a small TOML file (docs/contract.md):
//
//   provided = ["@rpath/libomp.dylib"]        # install names (globs) it ships
//   allow_prefix = ["/opt/homebrew/"]         # absolute prefixes its users have
//   allowed_rpaths = ["@loader_path/../lib"]  # LC_RPATH values (globs) it accepts
//   forbid = ["*omp*"]                        # no dependency may match, used or not
//   required = ["@rpath/libtorch*.dylib"]     # must be present at load: never weak
//   app = "../MyApp.app"                      # load every model in it (check --app)
//   sysroot = "../MacOSX.sdk"                 # where the system's libraries are
//   min_macos = "13.0"                        # the oldest macOS the app supports
//   arch = ["arm64", "x86_64"]                # slices every model must have
//   ptd = ["model.ptd"]                       # .ptd files the app passes (weights)
//   warnings_as_errors = true                 # every warning fails the gate
//   [levels]                                  # a rule's level: error, warning, note, off
//   unused-dependency = "error"
//   [[exempt]]                                # one dependency exempted from one rule
//   rule = "absolute-install-name"
//   dylib = "/opt/homebrew/lib/libfoo.dylib"
//
// Each list key takes a string or an array of strings, app, sysroot and min_macos
// one string (app, sysroot and ptd are paths relative to the contract's directory);
// every key is optional. Anything
// else (an unknown key, a table, a number, an empty string) is an error naming the
// file, line and key: a typo must never relax the gate.
#pragma once

#include <optional>
#include <string>

#include "core/jobs/check.h"

namespace machofix {

// The file's name, looked for beside each model (find_contract).
inline constexpr const char* kContractFileName = "machofix.toml";

// Reads and validates a contract file; the result has `declared` set. Throws Error
// (file; "line L, column C"; what is wrong with which key).
CheckOptions read_contract(const std::string& path);

// The contract that applies to a model found at `model_path` when none is named: the
// first machofix.toml in the model's directory, then in each parent up to the root
// (for `-`, standard input, from the current directory).
std::optional<std::string> find_contract(const std::string& model_path);

// Architecture names --arch and `arch` accept: the slices machofix reads.
bool known_arch(const std::string& arch);
inline constexpr const char* kArchNames = "arm64, arm64e, x86_64 or x86_64h";

// The contract's declarations plus the command line's (`extra`): lists concatenated;
// the command line's app, sysroot and min_macos replace the contract's.
CheckOptions combined(const CheckOptions& contract, const CheckOptions& extra);

}  // namespace machofix
