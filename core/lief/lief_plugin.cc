// machofix-lief.so: LIEF's reading of one Mach-O image, behind the C interface of
// core/lief/lief_plugin_abi.h. It reports what LIEF sees and decides nothing; the
// comparison with machofix's own reading is in core/lief/lief_check.cc.
#include <LIEF/MachO.hpp>
#include <LIEF/logging.hpp>

#include <cstring>
#include <exception>
#include <string>

#include "core/lief/lief_plugin_abi.h"

namespace {

int report_error(const std::string& message, char* error, size_t error_size) {
  if (error_size > 0) {
    size_t length = std::min(message.size(), error_size - 1);
    std::memcpy(error, message.data(), length);
    error[length] = '\0';
  }
  return 1;
}

void report(const LIEF::MachO::Binary& binary, const MachofixLiefVisitor& visitor) {
  for (const LIEF::MachO::LoadCommand& command : binary.commands()) {
    // Which commands are dependencies is core/lief/lief_check.cc's to decide.
    const auto* dylib = dynamic_cast<const LIEF::MachO::DylibCommand*>(&command);
    const char* dylib_name = dylib ? dylib->name().c_str() : nullptr;
    visitor.command(visitor.context, static_cast<uint32_t>(command.command()), command.command_offset(),
                    command.size(), dylib_name);
  }
  for (const LIEF::MachO::Symbol& symbol : binary.symbols())
    visitor.symbol(visitor.context, symbol.name().c_str(), symbol.type(), symbol.description(), symbol.value());
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int machofix_lief_read_v1(const uint8_t* data, size_t size,
                                                                            const MachofixLiefVisitor* visitor,
                                                                            char* error, size_t error_size) {
  try {
    LIEF::Logger::disable();
    std::vector<uint8_t> bytes(data, data + size);
    std::unique_ptr<LIEF::MachO::FatBinary> parsed =
        LIEF::MachO::Parser::parse(bytes, "slice", LIEF::MachO::ParserConfig::quick());
    if (!parsed || parsed->size() != 1) return report_error("LIEF does not see one Mach-O image", error, error_size);
    report(parsed->at(0), *visitor);
    return 0;
  } catch (const std::exception& e) {
    return report_error(std::string("LIEF cannot parse it: ") + e.what(), error, error_size);
  } catch (...) {
    return report_error("LIEF cannot parse it", error, error_size);
  }
}
