// The user's text corpus for crossreg-distill-data (--prompts): which files hold
// which documents. A .jsonl file holds one document per line (its "text" field, else
// its "prompt" field); any other file is one document; a directory is every regular
// file under it, sorted by path, read by the same two rules.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace crossreg {

struct CorpusDocument {
  std::string origin;  // where it came from: "notes.txt", "data.jsonl:12"
  std::string text;
};

// Reads every source in order. Errors start with "--prompts: " and name the file (and
// line, for JSONL: a line that is not JSON, or has neither a "text" nor a "prompt"
// string). Blank JSONL lines are skipped; hidden entries (names starting with '.')
// under a directory are skipped.
absl::StatusOr<std::vector<CorpusDocument>> ReadCorpus(const std::vector<std::string>& sources);

}  // namespace crossreg
