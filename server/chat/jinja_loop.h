// The `loop` variable of a for loop (jinja2's LoopContext): index, index0, revindex,
// revindex0, first, last, length, previtem, nextitem, depth, depth0, cycle(...) and
// changed(...).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/chat/jinja_value.h"

namespace crossreg::jinja {

class LoopContext : public Object, public std::enable_shared_from_this<LoopContext> {
 public:
  // The items the loop visits, after its filter.
  explicit LoopContext(std::vector<Value> items) : items_(std::move(items)) {}

  void set_index0(size_t index0) { index0_ = index0; }
  size_t size() const { return items_.size(); }
  const Value& item(size_t index) const { return items_[index]; }

  std::string TypeName() const override { return "LoopContext"; }
  Value GetAttr(std::string_view name) const override;
  absl::StatusOr<std::string> Repr(int depth) const override;
  void Clear() override {
    items_.clear();
    last_changed_.reset();
  }

  // loop.changed(*values): whether the values differ from the last call's.
  bool Changed(const Value& values) const;

 private:
  std::vector<Value> items_;
  size_t index0_ = 0;
  mutable std::optional<Value> last_changed_;
};

}  // namespace crossreg::jinja
