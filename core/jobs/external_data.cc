#include "core/jobs/external_data.h"

#include "core/base/error.h"
#include "core/io/file_io.h"
#include "core/io/pte.h"

namespace machofix {

void ExternalData::read(const std::vector<std::string>& ptd_files) {
  for (const std::string& path : ptd_files) {
    if (keys_.count(path)) continue;
    try {
      MappedFile file(path);
      if (!looks_like_ptd(file.bytes()))
        throw Error("not a .ptd file (no FlatTensor header): --ptd and the contract's ptd name the weights files of "
                    "the models");
      std::set<std::string>& keys = keys_[path];
      for (const NamedDataReport& named : inspect_pte(file.bytes()).named_data) keys.insert(named.key);
    } catch (Error& error) {
      keys_.erase(path);
      throw error.in_file(path);
    }
  }
}

const std::string* ExternalData::holder(const std::vector<std::string>& ptd_files, const std::string& key) const {
  for (const std::string& path : ptd_files) {
    auto known = keys_.find(path);
    if (known != keys_.end() && known->second.count(key)) return &path;
  }
  return nullptr;
}

}  // namespace machofix
