// machofix-lief.so: LIEF's reading of one Mach-O image, behind the C interface of
// core/lief/lief_plugin_abi.h. It reports what LIEF sees and decides nothing; the
// comparison with machofix's own reading is in core/lief/lief_check.cc.
#include <LIEF/MachO.hpp>
#include <LIEF/MachO/BinaryParser.hpp>
#include <LIEF/logging.hpp>

#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <vector>

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

// The image in one buffer, as LIEF 0.9's public parser wants it (the constructor that
// would take a stream of our own is private). BinaryParser copies it once more into
// its VectorStream: two copies of the image, which is why the image is a skeleton.
std::vector<uint8_t> joined(const MachofixLiefPiece* pieces, size_t count) {
  uint64_t size = 0;
  for (size_t i = 0; i < count; ++i) size += pieces[i].size;
  std::vector<uint8_t> image;
  image.reserve(size);
  for (size_t i = 0; i < count; ++i) image.insert(image.end(), pieces[i].data, pieces[i].data + pieces[i].size);
  return image;
}

bool is_thin_macho(uint32_t magic) {
  using LIEF::MachO::MACHO_TYPES;
  auto type = static_cast<MACHO_TYPES>(magic);
  return type == MACHO_TYPES::MH_MAGIC_64 || type == MACHO_TYPES::MH_CIGAM_64 || type == MACHO_TYPES::MH_MAGIC ||
         type == MACHO_TYPES::MH_CIGAM;
}

uint32_t bind_class(LIEF::MachO::BINDING_CLASS lief_class) {
  switch (lief_class) {
    case LIEF::MachO::BINDING_CLASS::BIND_CLASS_WEAK: return MACHOFIX_LIEF_BIND_WEAK;
    case LIEF::MachO::BINDING_CLASS::BIND_CLASS_LAZY: return MACHOFIX_LIEF_BIND_LAZY;
    default: return MACHOFIX_LIEF_BIND_STANDARD;
  }
}

void report(const LIEF::MachO::Binary& binary, const MachofixLiefVisitorV2& visitor) {
  for (const LIEF::MachO::LoadCommand& command : binary.commands()) {
    // Which commands are dependencies is core/lief/lief_check.cc's to decide.
    const auto* dylib = dynamic_cast<const LIEF::MachO::DylibCommand*>(&command);
    const char* dylib_name = dylib ? dylib->name().c_str() : nullptr;
    visitor.command(visitor.context, static_cast<uint32_t>(command.command()), command.command_offset(),
                    command.size(), dylib_name);
  }
  for (const LIEF::MachO::Symbol& symbol : binary.symbols())
    if (symbol.origin() == LIEF::MachO::SYMBOL_ORIGINS::SYM_ORIGIN_LC_SYMTAB)
      visitor.symbol(visitor.context, symbol.name().c_str(), symbol.type(), symbol.description(), symbol.value());
  if (!binary.has_dyld_info()) return;
  for (const LIEF::MachO::BindingInfo& bind : binary.dyld_info().bindings())
    visitor.bind(visitor.context, bind_class(bind.binding_class()), bind.library_ordinal(),
                 bind.has_symbol() ? bind.symbol().name().c_str() : nullptr, bind.is_weak_import() ? 1 : 0);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int machofix_lief_read_v2(const MachofixLiefPiece* pieces,
                                                                            size_t count,
                                                                            const MachofixLiefVisitorV2* visitor,
                                                                            char* error, size_t error_size) {
  try {
    LIEF::Logger::disable();
    std::unique_ptr<LIEF::MachO::Binary> binary;
    {
      std::vector<uint8_t> image = joined(pieces, count);
      // What Parser::parse checks first (is_macho), less the universal magics: one image.
      uint32_t magic = 0;
      if (image.size() >= sizeof magic) std::memcpy(&magic, image.data(), sizeof magic);
      if (!is_thin_macho(magic)) return report_error("LIEF does not see a thin Mach-O image", error, error_size);
      // The deep configuration: binds are read only by it (the rebases and the
      // exports trie too, which the image leaves out: core/lief/lief_skeleton.h).
      LIEF::MachO::BinaryParser parser(
          image, 0, visitor->read_binds ? LIEF::MachO::ParserConfig::deep() : LIEF::MachO::ParserConfig::quick());
      binary.reset(parser.get_binary());
    }
    if (!binary) return report_error("LIEF does not see one Mach-O image", error, error_size);
    report(*binary, *visitor);
    return 0;
  } catch (const std::exception& e) {
    return report_error(std::string("LIEF cannot parse it: ") + e.what(), error, error_size);
  } catch (...) {
    return report_error("LIEF cannot parse it", error, error_size);
  }
}
