#include "server/chat/jinja_call.h"

#include "absl/strings/str_cat.h"

namespace crossreg::jinja {

absl::StatusOr<std::vector<Value>> BindArgs(std::string_view function, const CallArgs& args,
                                            std::initializer_list<Param> params) {
  if (args.positional.size() > params.size()) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(function), "() takes at most ", params.size(), " argument",
                                                   params.size() == 1 ? "" : "s", " (", args.positional.size(),
                                                   " given)"));
  }
  std::vector<std::optional<Value>> bound(params.size());
  for (size_t i = 0; i < args.positional.size(); ++i) bound[i] = args.positional[i];
  for (const auto& [name, value] : args.keywords) {
    size_t i = 0;
    for (const Param& param : params) {
      if (param.name == name) break;
      ++i;
    }
    if (i == params.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(function), "() got an unexpected keyword argument '", name, "'"));
    }
    if (bound[i].has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(std::string(function), "() got multiple values for argument '", name, "'"));
    }
    bound[i] = value;
  }
  std::vector<Value> out;
  out.reserve(params.size());
  size_t i = 0;
  for (const Param& param : params) {
    if (bound[i].has_value()) {
      out.push_back(*std::move(bound[i]));
    } else if (param.default_value.has_value()) {
      out.push_back(*param.default_value);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(function), "() missing required argument '", std::string(param.name), "'"));
    }
    ++i;
  }
  return out;
}

absl::Status RenderBudget::StepsExhausted() const {
  return absl::InvalidArgumentError(
      absl::StrCat("the template ran past its budget of ", max_steps_, " evaluation steps"));
}

absl::Status RenderBudget::BytesExhausted() const {
  return absl::InvalidArgumentError(absl::StrCat("the template built text over its budget of ", max_bytes_, " bytes"));
}

}  // namespace crossreg::jinja
