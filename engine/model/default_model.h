// Where the embedded default model lives, so programs run with no --model.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace crossreg {

// Looks, in order, at $CROSSREG_DEFAULT_MODEL, <exe>/../share/crossreg/models/default
// and the source tree's models/default. NotFound (with the places looked at) if
// none holds a config.json.
absl::StatusOr<std::string> FindDefaultModel();

// The Cross-Regression adapter shipped inside a model directory (`<dir>/adapter` with an
// adapter_config.json), or "" when there is none. Used when a model directory is served
// without an explicit --adapter.
std::string BundledAdapter(const std::string& model_dir);
// The model directory's corpus n-gram table (ngram_table.bin), or "" if it has none.
std::string BundledNgramTable(const std::string& model_dir);

}  // namespace crossreg
