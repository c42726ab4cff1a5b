// A static n-gram table drawn from a corpus (the default model's training text): for
// each context of n tokens kept by the builder (training/ngram_table.py), the token
// that most often followed it. The n-gram drafter consults it where the request's own
// context has no match of two or more tokens (llama.cpp calls this a static lookup
// cache): drafts are still verified exactly, so the table changes speed, never output.
//
// File format (little-endian), written by `python3 -m training ngram-table`:
//   "CRNGRAM\0"            8-byte magic
//   uint32 version (1), vocab_size, max_n (1..8), bits_per_token (max_n * bits <= 64)
//   uint64 count[n] for n = 1..max_n
//   for n = 1..max_n: uint64 key[count[n]] (strictly increasing), then
//                     uint32 next[count[n]] (each < vocab_size)
// A key packs the n context tokens, the earliest in the most significant bits.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace crossreg {

class NgramTable {
 public:
  struct Order {
    std::vector<uint64_t> keys;  // sorted, unique
    std::vector<uint32_t> next;  // next[i] follows the context packed in keys[i]
  };

  // Reads and checks a table file for a model of `vocab_size` tokens (0: not checked).
  // Every error names the file and what is wrong with it.
  static absl::StatusOr<std::unique_ptr<NgramTable>> Load(const std::string& path, int64_t vocab_size);
  // The same checks on a file image already in memory; errors name `name`.
  static absl::StatusOr<std::unique_ptr<NgramTable>> Parse(const std::string& bytes, int64_t vocab_size,
                                                           const std::string& name);
  // From orders[n - 1] for n = 1..orders.size() (tests, tools); same checks as Load.
  static absl::StatusOr<std::unique_ptr<NgramTable>> FromOrders(int64_t vocab_size, int bits_per_token,
                                                                std::vector<Order> orders);
  // The file image Load reads.
  std::string Serialize() const;

  // The token that followed the longest suffix of tokens[0, len) the table knows, with
  // at least `min_n` tokens; -1 if none. `*n` (optional) receives the suffix length.
  int32_t Next(const int32_t* tokens, int len, int min_n = 1, int* n = nullptr) const;

  int max_n() const { return static_cast<int>(orders_.size()); }
  int64_t vocab_size() const { return vocab_size_; }
  int64_t entries() const;

 private:
  NgramTable() = default;
  int64_t vocab_size_ = 0;
  int bits_ = 0;
  std::vector<Order> orders_;
};

}  // namespace crossreg
