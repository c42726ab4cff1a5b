#include "clients/common/repeated_flag.h"

namespace crossreg::clients {

std::vector<std::string> TakeRepeatedFlag(std::vector<std::string>& args, std::string_view name) {
  const std::string bare = "--" + std::string(name);
  const std::string with_value = bare + "=";
  std::vector<std::string> values;
  std::vector<std::string> kept;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (i == 0 || a == "--") {
      // Everything after "--" is positional: copy it through untouched.
      if (a == "--") {
        kept.insert(kept.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
        break;
      }
      kept.push_back(a);
    } else if (a.rfind(with_value, 0) == 0) {
      values.push_back(a.substr(with_value.size()));
    } else if (a == bare && i + 1 < args.size()) {
      values.push_back(args[++i]);
    } else {
      kept.push_back(a);
    }
  }
  args = std::move(kept);
  return values;
}

std::vector<std::string> SplitEscapedList(std::string_view value) {
  std::vector<std::string> items;
  std::string current;
  for (size_t i = 0; i < value.size(); ++i) {
    const char c = value[i];
    if (c == '\\' && i + 1 < value.size()) {
      const char next = value[++i];
      switch (next) {
        case ',': current += ','; break;
        case 'n': current += '\n'; break;
        case 't': current += '\t'; break;
        case '\\': current += '\\'; break;
        default: current += '\\'; current += next; break;  // unknown escape: keep as typed
      }
    } else if (c == ',') {
      if (!current.empty()) items.push_back(std::move(current));
      current.clear();
    } else {
      current += c;
    }
  }
  if (!current.empty()) items.push_back(std::move(current));
  return items;
}

}  // namespace crossreg::clients
