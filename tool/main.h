// The command line of machofix as a function: tool/entry.cc is the executable around
// it, tests/failures/proof_steps/machofix_spoiled.cc a test binary around it.
#pragma once

namespace machofix::cli {

// Parses the arguments, runs the command, returns the exit status.
int main(int argc, char** argv);

}  // namespace machofix::cli
