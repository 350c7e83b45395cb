// core/load_commands: replacing, inserting and removing load commands, ncmds and
// sizeofcmds, and the header-padding accounting; plan_edit's choices on synthetic
// images (tests/support/macho_builder.h) read by the real parser.
#include <doctest/doctest.h>

#include "tests/support/thrown.h"
#include "core/rewrite/edit.h"
#include "core/rewrite/load_commands.h"
#include "core/format/macho.h"
#include "core/format/macho_format.h"
#include "core/format/macho_structs.h"
#include "tests/support/macho_builder.h"

using namespace machofix;
using namespace machofix::test;

namespace {

const char* const kSystem = "/usr/lib/libSystem.B.dylib";
const char* const kOmp = "/opt/llvm-openmp/lib/libomp.dylib";

Image with_padding(uint32_t padding) {
  return MachOBuilder().header_padding(padding).load_dylib(kSystem).load_dylib(kOmp).undefined("_malloc", 1).build();
}

std::vector<uint8_t> written(const MachO& image, const LoadCommandList& list) {
  std::vector<uint8_t> out(image.bytes.data(), image.bytes.data() + image.bytes.size());
  list.write(image, out);
  return out;
}

std::string refusal_of(const MachO& image, const LoadCommandList& list) {
  try {
    written(image, list);
  } catch (const Error& error) {
    CHECK(error.refusal());
    return error.problem();
  }
  return "";
}

}  // namespace

TEST_CASE("a string command is rounded up to 8 bytes with zeros, its fixed part kept") {
  std::vector<uint8_t> rpath = rpath_command("@loader_path");  // 12 + 13 = 25 -> 32
  CHECK(rpath.size() == 32);
  CHECK(Bytes(rpath).u32(0) == macho::LC_RPATH);
  CHECK(Bytes(rpath).u32(4) == 32);
  CHECK(command_string(rpath, offsetof(macho::RpathCommand, path_offset)) == "@loader_path");
  CHECK(rpath.back() == 0);
  std::vector<uint8_t> longer = with_command_string(rpath, offsetof(macho::RpathCommand, path_offset), "@executable_path/../Frameworks");
  CHECK(longer.size() == 48);  // 12 + 31 = 43 -> 48
  CHECK(Bytes(longer).u32(4) == 48);
  CHECK(command_string(longer, offsetof(macho::RpathCommand, path_offset)) == "@executable_path/../Frameworks");
  std::vector<uint8_t> exact = with_command_string(rpath, offsetof(macho::RpathCommand, path_offset), "/abcdefghij");  // 12 + 12 = 24
  CHECK(exact.size() == 24);
}

TEST_CASE("the list writes ncmds, sizeofcmds and the commands shifted; freed bytes become zero") {
  Image built = with_padding(64);
  MachO image = parse_macho(built.view());
  LoadCommandList list(image);
  CHECK(!list.changed());
  size_t omp = image.dylibs[1].command_index;
  list.remove(omp);
  list.insert(list.size(), rpath_command("@loader_path"));
  CHECK(list.changed());
  std::vector<uint8_t> out = written(image, list);
  MachO after = parse_macho(Bytes(out));
  CHECK(after.ncmds == image.ncmds);
  CHECK(after.sizeofcmds == image.sizeofcmds - image.commands[omp].size + 32);
  REQUIRE(after.dylibs.size() == 1);
  REQUIRE(after.rpaths.size() == 1);
  CHECK(after.rpaths[0].path == "@loader_path");
  CHECK(after.rpaths[0].command_index == after.commands.size() - 1);
  for (uint64_t at = after.load_commands_end(); at < image.load_commands_end(); ++at) CHECK(out[at] == 0);
  // Everything after the longer of the two areas is as it was.
  uint64_t end = std::max(after.load_commands_end(), image.load_commands_end());
  CHECK(std::equal(out.begin() + end, out.end(), built.bytes.begin() + end));
}

TEST_CASE("the area grows into the header padding and no further: the refusal names needed and available") {
  Image built = with_padding(32);
  MachO image = parse_macho(built.view());
  CHECK(header_padding_end(image) >= image.load_commands_end() + 32);
  uint64_t room = header_padding_end(image) - image.load_commands_end();
  LoadCommandList fits(image);
  // A command exactly the size of the room fits.
  std::string path(room - sizeof(macho::RpathCommand) - 1, 'p');
  fits.insert(fits.size(), rpath_command(path));
  CHECK(fits.sizeofcmds() == image.sizeofcmds + room);
  std::vector<uint8_t> fitted = written(image, fits);
  CHECK(parse_macho(Bytes(fitted)).rpaths.at(0).path == path);
  LoadCommandList too_big(image);
  too_big.insert(too_big.size(), rpath_command(path + "12345678"));
  std::string problem = refusal_of(image, too_big);
  CHECK(problem.find("would need " + std::to_string(image.sizeofcmds + room + 8) + " bytes, but only " +
                     std::to_string(image.sizeofcmds + room) + " are available") != std::string::npos);
  CHECK(problem.find("(" + std::to_string(room) + " bytes of header padding)") != std::string::npos);
}

TEST_CASE("plan_edit: install_name_tool's order, 'already' for a satisfied edit, errors for none matching") {
  Image built = with_padding(256);
  MachO image = parse_macho(built.view());
  EditOptions options;
  options.change = {{"*libomp*", "@rpath/libomp.dylib"}};
  options.add_rpath = {"@loader_path"};
  options.id = "@rpath/m.dylib";
  EditPlan plan = plan_edit(image, options);
  REQUIRE(plan.records.size() == 3);
  CHECK(plan.records[0].kind == EditKind::Id);
  CHECK(plan.records[1].kind == EditKind::Change);
  CHECK(plan.records[1].old_value == kOmp);
  CHECK(plan.records[2].kind == EditKind::AddRpath);
  std::vector<uint8_t> edited_bytes = apply_edit(image, plan);
  MachO after = parse_macho(Bytes(edited_bytes));
  CHECK(after.dylibs[1].install_name == "@rpath/libomp.dylib");
  CHECK(after.id_name == "@rpath/m.dylib");
  REQUIRE(after.rpaths.size() == 1);
  // The same edits again: nothing to do.
  std::vector<uint8_t> once = apply_edit(image, plan);
  MachO edited = parse_macho(Bytes(once));
  EditPlan again = plan_edit(edited, options);
  CHECK(!again.changes());
  for (const EditRecord& record : again.records) CHECK(record.status == EditStatus::Already);
  // --rpath onto an rpath that is there already; --delete-rpath and --change with no match.
  EditOptions duplicate;
  duplicate.add_rpath = {"/b"};
  std::vector<uint8_t> with_b = apply_edit(edited, plan_edit(edited, duplicate));
  MachO two = parse_macho(Bytes(with_b));
  duplicate = {};
  duplicate.rpath = {{"/b", "@loader_path"}};
  CHECK_THROWS_WITH_AS(plan_edit(two, duplicate), "--rpath '/b' '@loader_path': would duplicate the LC_RPATH '@loader_path'",
                       Error);
  EditOptions none;
  none.delete_rpath = {"/nowhere/*"};
  CHECK_THROWS_WITH_AS(plan_edit(image, none), "--delete-rpath '/nowhere/*': no LC_RPATH matches", Error);
  test::thrown_as(ErrorKind::Inapplicable, [&] { plan_edit(image, none); });
  test::thrown_as(ErrorKind::Inapplicable, [&] { plan_edit(two, duplicate); });
  none.unmatched_is_note = true;
  EditPlan noted = plan_edit(image, none);
  CHECK(!noted.changes());
  REQUIRE(noted.records.size() == 1);
  CHECK(noted.records[0].status == EditStatus::NoMatch);
}
