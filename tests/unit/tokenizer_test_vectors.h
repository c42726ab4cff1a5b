// Reads llama.cpp's tokenizer test vectors (NAME.gguf.inp / NAME.gguf.out) and builds
// tokenizers from the vocab-only GGUF files next to them.
#pragma once

#include <cstdint>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/io/gguf_file.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/testing/test_paths.h"

namespace crossreg::testing {

struct TokenizerTestCase {
  std::string text;
  std::vector<int32_t> ids;
};

inline std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Each string in .inp is followed by "\n__ggml_vocab_test__\n" (so strings may themselves
// be empty or consist of newlines); .out has one line of space-separated ids per string.
inline std::vector<TokenizerTestCase> LoadTokenizerTestCases(const std::string& vocab_name) {
  const std::string inp = ReadWholeFile(TokenizerTestData(vocab_name + ".inp"));
  const std::string out = ReadWholeFile(TokenizerTestData(vocab_name + ".out"));
  const std::string separator = "\n__ggml_vocab_test__\n";
  std::vector<TokenizerTestCase> cases;
  size_t pos = 0;
  while (pos < inp.size()) {
    const size_t end = inp.find(separator, pos);
    if (end == std::string::npos) break;
    cases.push_back({inp.substr(pos, end - pos), {}});
    pos = end + separator.size();
  }
  std::istringstream lines(out);
  std::string line;
  for (TokenizerTestCase& c : cases) {
    if (!std::getline(lines, line)) break;
    std::istringstream ids(line);
    int64_t id;
    while (ids >> id) c.ids.push_back(static_cast<int32_t>(id));
  }
  return cases;
}

inline absl::StatusOr<TokenizerSpec> LoadGgufTokenizerSpec(const std::string& path) {
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(path);
  if (!file.ok()) return file.status();
  return TokenizerSpecFromGguf((*file)->metadata());
}

}  // namespace crossreg::testing
