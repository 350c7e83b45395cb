// The .ptd files an application passes with its models (check --ptd, the contract's
// `ptd`): ExecuTorch pairs nothing itself, the application hands its Module the
// external data map. An AOTI delegate's weights key is then looked up there first
// (MergedDataMap: the external map before the program's own named data).
//
// Each file is read once for the whole run, under ExecuTorch's load rules for a .ptd
// (core/io/pte_load_rules.h): every key such a file holds can be read.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

namespace machofix {

class ExternalData {
 public:
  // Reads every file not read yet. Throws Error naming the file when it cannot be
  // read, is not a .ptd, or would not load.
  void read(const std::vector<std::string>& ptd_files);
  // The first of `ptd_files` (read before) that holds `key`; nullptr when none does.
  const std::string* holder(const std::vector<std::string>& ptd_files, const std::string& key) const;

 private:
  std::map<std::string, std::set<std::string>> keys_;  // by path
};

}  // namespace machofix
