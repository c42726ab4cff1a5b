// A corpus n-gram table file (engine/decoding/ngram_table.h), parsed as the server
// loads ngram_table.bin. A table that parses serializes back to the same bytes and
// answers lookups of any context (ids in or out of its vocabulary) without faulting.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/decoding/ngram_table.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace crossreg;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  auto table = NgramTable::Parse(bytes, 0, "fuzz");
  if (!table.ok()) return 0;
  if ((*table)->Serialize() != bytes) __builtin_trap();
  // Contexts cut from the input itself, so that lookups can hit.
  std::vector<int32_t> context;
  for (size_t i = 0; i + 1 < size && context.size() < 16; i += 2) {
    context.push_back(static_cast<int32_t>((data[i] | (data[i + 1] << 8)) - 256));
  }
  for (int len = 0; len <= static_cast<int>(context.size()); ++len) {
    int n = -1;
    const int32_t next = (*table)->Next(context.data(), len, 1, &n);
    if (next >= 0 && (next >= (*table)->vocab_size() || n < 1 || n > len)) __builtin_trap();
  }
  return 0;
}
