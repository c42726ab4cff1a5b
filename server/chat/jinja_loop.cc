#include "server/chat/jinja_loop.h"

#include "absl/strings/str_cat.h"

namespace crossreg::jinja {
namespace {

class LoopMethod : public Callable {
 public:
  LoopMethod(std::shared_ptr<const LoopContext> loop, bool cycle, size_t index0)
      : loop_(std::move(loop)), cycle_(cycle), index0_(index0) {}
  std::string TypeName() const override { return "method"; }
  absl::StatusOr<std::string> Repr() const override {
    return absl::InvalidArgumentError("printing a loop method is not supported");
  }
  absl::StatusOr<Value> Call(CallArgs args) const override {
    if (!args.keywords.empty()) return absl::InvalidArgumentError("loop methods take no keyword arguments");
    if (!cycle_) return Value::Bool(loop_->Changed(Value::Tuple(std::move(args.positional))));
    if (args.positional.empty()) return absl::InvalidArgumentError("no items for cycling given");
    return args.positional[index0_ % args.positional.size()];
  }

 private:
  std::shared_ptr<const LoopContext> loop_;
  bool cycle_;
  size_t index0_;
};

Value NoItem(std::string hint) {
  UndefinedData data;
  data.hint = std::move(hint);
  return Value::Undefined(std::move(data));
}

}  // namespace

Value LoopContext::GetAttr(std::string_view name) const {
  const auto length = static_cast<int64_t>(items_.size());
  const auto index0 = static_cast<int64_t>(index0_);
  if (name == "index0") return Value::Int(index0);
  if (name == "index") return Value::Int(index0 + 1);
  if (name == "revindex0") return Value::Int(length - index0 - 1);
  if (name == "revindex") return Value::Int(length - index0);
  if (name == "first") return Value::Bool(index0 == 0);
  if (name == "last") return Value::Bool(index0 + 1 == length);
  if (name == "length") return Value::Int(length);
  if (name == "depth") return Value::Int(1);
  if (name == "depth0") return Value::Int(0);
  if (name == "previtem") return index0 > 0 ? items_[index0_ - 1] : NoItem("there is no previous item");
  if (name == "nextitem") return index0 + 1 < length ? items_[index0_ + 1] : NoItem("there is no next item");
  if (name == "cycle" || name == "changed") {
    return Value::FromCallable(std::make_shared<LoopMethod>(shared_from_this(), name == "cycle", index0_));
  }
  UndefinedData data;
  data.name = std::string(name);
  data.owner = "LoopContext";
  return Value::Undefined(std::move(data));
}

absl::StatusOr<std::string> LoopContext::Repr(int) const {
  return absl::StrCat("<LoopContext ", index0_ + 1, "/", items_.size(), ">");
}

bool LoopContext::Changed(const Value& values) const {
  if (last_changed_.has_value() && PythonEquals(*last_changed_, values)) return false;
  last_changed_ = values;
  return true;
}

}  // namespace crossreg::jinja
