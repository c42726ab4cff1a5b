// The global names a chat template sees besides its context, as Hugging Face's
// environment defines them: jinja2's range (the sandbox's, at most 100000 items), dict,
// namespace and joiner, and Hugging Face's raise_exception(message) and
// strftime_now(format) (the local time now, as datetime.now().strftime).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "server/chat/jinja_call.h"
#include "server/chat/jinja_value.h"

namespace crossreg::jinja {

// jinja2's namespace(): an object whose attributes {% set ns.name = ... %} changes.
class Namespace : public Object {
 public:
  std::string TypeName() const override { return "Namespace"; }
  Value GetAttr(std::string_view name) const override;
  absl::StatusOr<std::string> Repr(int depth) const override;
  void Clear() override { attributes_.clear(); }
  void Set(const std::string& name, Value value);

 private:
  std::vector<std::pair<std::string, Value>> attributes_;
};

// The globals of one render; namespaces it makes are kept in `arena`, ranges are
// charged to `budget`. Both outlive the values.
std::vector<std::pair<std::string, Value>> MakeGlobals(RenderBudget* budget, RenderArena* arena);

}  // namespace crossreg::jinja
