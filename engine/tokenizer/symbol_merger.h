// The merge loop shared by both BPE flavours: adjacent symbols of a text are merged,
// highest priority pair first (ties: leftmost), until no pair can merge.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"

namespace crossreg {

// Priority of merging `left` and `right` (adjacent in memory), or nullopt if they
// cannot merge. Higher merges first.
using PairPriority =
    absl::FunctionRef<std::optional<double>(std::string_view left, std::string_view right)>;

// `symbols` are consecutive, contiguous pieces of one buffer. Returns the merged pieces,
// still views into that buffer, in order.
std::vector<std::string_view> MergeSymbolsByPriority(std::vector<std::string_view> symbols,
                                                     PairPriority priority);

}  // namespace crossreg
