// Cuts text into raw fragments and whole special tokens ("<|eot_id|>", "</s>") before
// the BPE runs, so those pieces are never split by merges.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace crossreg {

struct TextFragment {
  std::string_view text;  // raw text when token_id < 0
  int32_t token_id = -1;
};

class SpecialTokenSplitter {
 public:
  // Add every piece, then Finish() once before Split (sorting once keeps building
  // linear-logarithmic however many pieces share a first byte).
  void Add(std::string piece, int32_t id);
  void Finish();
  bool empty() const { return by_first_byte_.empty(); }
  // Leftmost-longest matching of the added pieces.
  std::vector<TextFragment> Split(std::string_view text) const;

 private:
  struct Entry {
    std::string piece;
    int32_t id;
  };
  // Candidates by first byte, longest first.
  std::unordered_map<unsigned char, std::vector<Entry>> by_first_byte_;
};

}  // namespace crossreg
