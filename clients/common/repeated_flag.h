// Repeatable flags. Abseil keeps only the last value of a flag given twice, so flags
// meant to be repeated (--stop A --stop B) are taken out of argv before it parses.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace crossreg::clients {

// Removes every "--NAME=VALUE" and "--NAME VALUE" from args (args[0] is the program)
// and returns the values in order. Scanning ends at a bare "--", as Abseil's does.
std::vector<std::string> TakeRepeatedFlag(std::vector<std::string>& args, std::string_view name);

// Splits a comma-separated list whose items may contain escapes: "\," is a comma,
// "\n" a newline, "\t" a tab, "\\" a backslash. Empty items are dropped.
std::vector<std::string> SplitEscapedList(std::string_view value);

}  // namespace crossreg::clients
