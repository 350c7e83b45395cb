#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace old_writer {

std::string string_text(const std::string& text);
std::string double_text(double number);
std::string int_text(int64_t number);
std::string uint_text(uint64_t number);
std::string document(const std::string& odd_key, const std::vector<std::string>& strings, double seconds);

}  // namespace old_writer
