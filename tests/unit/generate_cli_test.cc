// crossreg-generate reproduces the stories260K reference from the command line.
#include <array>
#include <cstdio>
#include <memory>
#include <sys/wait.h>
#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/testing/stories_reference.h"
#include "tests/testing/test_paths.h"

namespace crossreg {
namespace {

struct CommandResult {
  int exit_code = -1;
  std::string output;
};

CommandResult RunCommand(const std::string& cmd) {
  CommandResult r;
  FILE* pipe = popen((cmd + " 2>&1").c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string Quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

TEST(GenerateCliTest, ReproducesStoriesReferenceAsJsonl) {
  for (const auto& ref : testing::LoadStoriesReference()) {
    const auto r = RunCommand(testing::BinDir() + "/crossreg-generate --model " + testing::Stories260KGguf() +
                              " --prompt " + Quote(ref.prompt) + " --max-new-tokens " +
                              std::to_string(ref.greedy_ids.size()) + " --ignore-eos --format jsonl");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto j = nlohmann::json::parse(r.output, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.output;
    EXPECT_EQ(j["prompt_ids"].get<std::vector<int>>(), ref.prompt_ids);
    EXPECT_EQ(j["ids"].get<std::vector<int>>(), ref.greedy_ids);
    EXPECT_TRUE(j["text"].is_string());
    EXPECT_GT(j["timing"]["decode_tokens_per_s"].get<double>(), 0.0);
  }
}

TEST(GenerateCliTest, BadFlagsGetClearErrors) {
  const std::string bin = testing::BinDir() + "/crossreg-generate --model " + testing::Stories260KGguf();
  auto r = RunCommand(bin + " --prompt hi --temperature -1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("temperature"), std::string::npos) << r.output;
  r = RunCommand(bin + " --prompt hi --top-p 1.5");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("top_p"), std::string::npos) << r.output;
  r = RunCommand(bin + " --prompt hi --format xml");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--format"), std::string::npos) << r.output;
  r = RunCommand(testing::BinDir() + "/crossreg-generate --model /nonexistent.gguf --prompt hi");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("/nonexistent.gguf"), std::string::npos) << r.output;
  r = RunCommand(bin + " --prompt-ids 1,2,99999");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("vocabulary"), std::string::npos) << r.output;
}

TEST(GenerateCliTest, TextFormatStreamsPromptAndContinuation) {
  const auto r = RunCommand(testing::BinDir() + "/crossreg-generate --model " + testing::Stories260KGguf() +
                            " --prompt 'Once upon a time' --max-new-tokens 20 --seed 3 --temperature 0.8");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("Once upon a time", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("tokens/s"), std::string::npos);
  // Same seed, same text.
  const auto again = RunCommand(testing::BinDir() + "/crossreg-generate --model " + testing::Stories260KGguf() +
                                " --prompt 'Once upon a time' --max-new-tokens 20 --seed 3 --temperature 0.8");
  EXPECT_EQ(r.output.substr(0, r.output.find("[crossreg")), again.output.substr(0, again.output.find("[crossreg")));
}

}  // namespace
}  // namespace crossreg
