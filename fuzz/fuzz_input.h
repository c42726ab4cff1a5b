// What the fuzz targets share: one fuzz input cut into several files, and the short
// texts a fuzzed tokenizer encodes.
//
// Layout of a multi-file input: for each part but the last, a 4-byte little-endian
// length and then that many bytes (cut short at the end of the input); the last part
// takes the rest. A length of 0xFFFFFFFF marks the part absent (a file that does not
// exist). make_seeds.cc writes seeds with JoinParts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace crossreg::fuzz {

inline constexpr uint32_t kAbsentPart = 0xFFFFFFFF;

inline std::vector<std::optional<std::string_view>> SplitParts(const uint8_t* data, size_t size,
                                                               size_t parts) {
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  std::vector<std::optional<std::string_view>> out;
  for (size_t i = 0; i + 1 < parts; ++i) {
    uint32_t length = 0;
    const size_t header = std::min<size_t>(4, rest.size());
    std::memcpy(&length, rest.data(), header);  // host is little endian (x86, arm64)
    rest.remove_prefix(header);
    if (length == kAbsentPart) {
      out.emplace_back(std::nullopt);
      continue;
    }
    const size_t take = std::min<size_t>(length, rest.size());
    out.emplace_back(rest.substr(0, take));
    rest.remove_prefix(take);
  }
  out.emplace_back(rest);
  return out;
}

// The inverse of SplitParts.
inline std::string JoinParts(const std::vector<std::optional<std::string>>& parts) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i + 1 == parts.size()) {
      out += parts[i].value_or("");
      break;
    }
    const uint32_t length =
        parts[i].has_value() ? static_cast<uint32_t>(parts[i]->size()) : kAbsentPart;
    char header[4];
    std::memcpy(header, &length, 4);
    out.append(header, 4);
    if (parts[i].has_value()) out += *parts[i];
  }
  return out;
}

// Texts every fuzzed tokenizer encodes: ASCII, spaces and newlines, multi-byte UTF-8, an
// invalid byte, and spellings of special tokens.
inline const std::vector<std::string_view>& SampleTexts() {
  static const std::vector<std::string_view> texts = {
      "Once upon a time, there was a cat.",
      "  def f(x):\n\treturn x ** 2  # ok\r\n",
      "caf\xC3\xA9 \xE2\x96\x81 \xF0\x9F\x98\x80 \xE6\x97\xA5\xE6\x9C\xAC",
      "bad \xFF\xC3 byte",
      "<s>a</s><|begin_of_text|>b<|endoftext|><unk>",
      "",
  };
  return texts;
}

// Reads every byte of [data, data + n): under ASan, a view past its buffer fails here.
inline uint8_t TouchBytes(const void* data, size_t n) {
  const auto* p = static_cast<const volatile uint8_t*>(data);
  uint8_t x = 0;
  for (size_t i = 0; i < n; ++i) x ^= p[i];
  return x;
}

}  // namespace crossreg::fuzz
