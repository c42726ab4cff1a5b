// What every builtin (filter, test, method, global function) shares: binding a call's
// arguments to a Python-style signature, and the budgets of the render it runs in.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/chat/jinja_value.h"

namespace crossreg::jinja {

// One parameter of a builtin: required when it has no default.
struct Param {
  std::string_view name;
  std::optional<Value> default_value;
};

// The arguments of `args` in the order of `params`, defaults filled in. Fails as Python
// does: "replace() takes at most 3 arguments (4 given)", "... missing required argument
// 'old'", "... got an unexpected keyword argument 'x'".
absl::StatusOr<std::vector<Value>> BindArgs(std::string_view function, const CallArgs& args,
                                            std::initializer_list<Param> params);

// The budgets of one render, charged by the interpreter and by builtins whose work
// grows with their input, so that no template makes the server spin or swell.
class RenderBudget {
 public:
  RenderBudget(int64_t max_steps, size_t max_bytes) : max_steps_(max_steps), max_bytes_(max_bytes) {}

  absl::Status Charge(int64_t steps) {
    steps_ += steps;
    if (steps_ > max_steps_) return StepsExhausted();
    return absl::OkStatus();
  }
  // Work proportional to `bytes` of text, one step per 64 bytes.
  absl::Status ChargeBytes(size_t bytes) { return Charge(static_cast<int64_t>(bytes / 64) + 1); }
  // Refuses a string (or the output) that would grow past the byte budget.
  absl::Status CheckSize(size_t bytes) const {
    if (bytes > max_bytes_) return BytesExhausted();
    return absl::OkStatus();
  }
  size_t max_bytes() const { return max_bytes_; }

 private:
  absl::Status StepsExhausted() const;
  absl::Status BytesExhausted() const;

  const int64_t max_steps_;
  const size_t max_bytes_;
  int64_t steps_ = 0;
};

// The objects a render made that hold values and can change (namespaces, loop objects):
// they are cleared when the render ends, which frees any reference cycle a template
// built through them (ns.self = ns) and keeps their destruction shallow.
class RenderArena {
 public:
  RenderArena() = default;
  RenderArena(const RenderArena&) = delete;
  RenderArena& operator=(const RenderArena&) = delete;
  ~RenderArena() {
    for (const auto& object : objects_) object->Clear();
  }
  void Keep(std::shared_ptr<Object> object) { objects_.push_back(std::move(object)); }

 private:
  std::vector<std::shared_ptr<Object>> objects_;
};

}  // namespace crossreg::jinja
