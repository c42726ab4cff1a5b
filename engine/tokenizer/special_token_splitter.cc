#include "engine/tokenizer/special_token_splitter.h"

#include <algorithm>

namespace crossreg {

void SpecialTokenSplitter::Add(std::string piece, int32_t id) {
  if (piece.empty()) return;
  by_first_byte_[static_cast<unsigned char>(piece[0])].push_back({std::move(piece), id});
}

void SpecialTokenSplitter::Finish() {
  // Longest first; among equal lengths the first added wins.
  for (auto& [byte, entries] : by_first_byte_) {
    std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
      return a.piece.size() > b.piece.size();
    });
  }
}

std::vector<TextFragment> SpecialTokenSplitter::Split(std::string_view text) const {
  std::vector<TextFragment> fragments;
  size_t raw_start = 0;
  size_t i = 0;
  while (i < text.size()) {
    const Entry* match = nullptr;
    if (auto it = by_first_byte_.find(static_cast<unsigned char>(text[i]));
        it != by_first_byte_.end()) {
      for (const Entry& e : it->second) {
        if (text.substr(i, e.piece.size()) == e.piece) {
          match = &e;
          break;
        }
      }
    }
    if (match == nullptr) {
      ++i;
      continue;
    }
    if (i > raw_start) fragments.push_back({text.substr(raw_start, i - raw_start), -1});
    fragments.push_back({text.substr(i, match->piece.size()), match->id});
    i += match->piece.size();
    raw_start = i;
  }
  if (raw_start < text.size()) fragments.push_back({text.substr(raw_start), -1});
  return fragments;
}

}  // namespace crossreg
