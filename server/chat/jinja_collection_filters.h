// The filters over sequences and mappings, as jinja2 3.1 has them: join, select, reject,
// selectattr, rejectattr, map, sort, dictsort, unique, min, max, sum, first, last,
// reverse, batch. Attribute arguments ("function.name", "0") are looked up item first,
// as jinja2's attrgetter does; filters that are generators in jinja2 return one-shot
// iterators. jinja_filters.cc lists them with the other filters.
#pragma once

#include "absl/status/statusor.h"
#include "server/chat/jinja_call.h"
#include "server/chat/jinja_value.h"

namespace crossreg::jinja {

absl::StatusOr<Value> JoinFilter(const Value& in, const CallArgs& args, RenderBudget& budget);
// select and reject, or with `by_attribute` selectattr and rejectattr.
absl::StatusOr<Value> SelectFilter(const Value& in, const CallArgs& args, RenderBudget& budget, bool select,
                                   bool by_attribute);
absl::StatusOr<Value> MapFilter(const Value& in, const CallArgs& args, RenderBudget& budget);
absl::StatusOr<Value> SortFilter(const Value& in, const CallArgs& args, RenderBudget& budget);
absl::StatusOr<Value> DictSortFilter(const Value& in, const CallArgs& args, RenderBudget& budget);
absl::StatusOr<Value> UniqueFilter(const Value& in, const CallArgs& args, RenderBudget& budget);
absl::StatusOr<Value> MinMaxFilter(const Value& in, const CallArgs& args, RenderBudget& budget, bool max);
absl::StatusOr<Value> SumFilter(const Value& in, const CallArgs& args, RenderBudget& budget);
absl::StatusOr<Value> FirstOrLastFilter(const Value& in, const CallArgs& args, bool first);
absl::StatusOr<Value> ReverseFilter(const Value& in, const CallArgs& args, RenderBudget& budget);
absl::StatusOr<Value> BatchFilter(const Value& in, const CallArgs& args, RenderBudget& budget);

}  // namespace crossreg::jinja
