// crossreg-generate reproduces the stories260K reference from the command line.
#include <array>
#include <filesystem>
#include <cstdio>
#include <memory>
#include <sys/wait.h>
#include <unistd.h>
#include <string>

#include "engine/model/lora_adapter.h"
#include "engine/model/model_loader.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "engine/model/peft_writer.h"
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
  r = RunCommand(bin + " --prompt hi --weights fp4");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--weights must be bf16 or fp8"), std::string::npos) << r.output;
  // FP8 weights are a CUDA format: the CPU backend refuses them rather than computing in bf16.
  r = RunCommand(bin + " --prompt hi --backend cpu --weights fp8");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("the CPU backend has no FP8 kernels"), std::string::npos) << r.output;
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

// --stop: Generate runs the server's step, stop strings included. The greedy reference's
// text, cut where a word of it first appears, with that word left out.
TEST(GenerateCliTest, StopTextEndsTheOutputWhereItFirstAppears) {
  const auto ref = testing::LoadStoriesReference().front();
  const std::string bin = testing::BinDir() + "/crossreg-generate --model " + testing::Stories260KGguf() +
                          " --prompt " + Quote(ref.prompt) + " --max-new-tokens " +
                          std::to_string(ref.greedy_ids.size()) + " --ignore-eos --format jsonl";
  const auto full = RunCommand(bin);
  ASSERT_EQ(full.exit_code, 0) << full.output;
  const std::string text = nlohmann::json::parse(full.output)["text"].get<std::string>();
  // A word from the middle of the continuation, at its first appearance.
  const size_t space = text.find(' ', text.size() / 2);
  ASSERT_NE(space, std::string::npos) << text;
  const size_t end = text.find(' ', space + 1);
  const std::string word = text.substr(space, end == std::string::npos ? std::string::npos : end - space);
  ASSERT_GT(word.size(), 1u);
  const auto stopped = RunCommand(bin + " --stop " + Quote(word));
  ASSERT_EQ(stopped.exit_code, 0) << stopped.output;
  const auto j = nlohmann::json::parse(stopped.output);
  EXPECT_EQ(j["text"].get<std::string>(), text.substr(0, text.find(word))) << "stop " << word;
  EXPECT_EQ(j["finish_reason"].get<std::string>(), "stop");
  EXPECT_LT(j["ids"].size(), ref.greedy_ids.size());
  const auto empty = RunCommand(bin + " --stop 'the,'");  // a list with an empty text
  EXPECT_NE(empty.exit_code, 0);
  EXPECT_NE(empty.output.find("--stop"), std::string::npos) << empty.output;
}

}  // namespace
}  // namespace crossreg

namespace crossreg {
namespace {

class GenerateCliDecodingTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto model = LoadModel(testing::Stories260KGguf());
    ASSERT_TRUE(model.ok()) << model.status();
    // Per process: ctest runs this suite's tests in parallel processes, each writing its
    // adapters here (with a shared path one could truncate the file another is reading).
    const std::string pid = std::to_string(::getpid());
    adapter_dir_ = ::testing::TempDir() + "crossreg_cli_adapter_" + pid;
    mismatched_dir_ = ::testing::TempDir() + "crossreg_cli_mismatched_adapter_" + pid;
    std::filesystem::create_directories(adapter_dir_);
    std::filesystem::create_directories(mismatched_dir_);
    RandomLoraOptions lo;
    lo.magnitude = 0.5f;
    auto adapter = MakeRandomLoraAdapter((*model)->config, lo);
    const auto written = WritePeftAdapter(*adapter, (*model)->config, adapter_dir_, DType::kF32);
    ASSERT_TRUE(written.ok()) << written;
    // An adapter for another shape must be refused.
    ModelConfig other = (*model)->config;
    other.hidden_size = 32;
    other.head_dim = 4;
    auto wrong = MakeRandomLoraAdapter(other, lo);
    const auto written_wrong = WritePeftAdapter(*wrong, other, mismatched_dir_, DType::kF32);
    ASSERT_TRUE(written_wrong.ok()) << written_wrong;
  }
  static void TearDownTestSuite() {
    std::error_code ignored;
    std::filesystem::remove_all(adapter_dir_, ignored);
    std::filesystem::remove_all(mismatched_dir_, ignored);
  }
  static std::string Bin() {
    return testing::BinDir() + "/crossreg-generate --model " + testing::Stories260KGguf() + " --prompt 'Once upon a time'";
  }
  static std::string adapter_dir_;
  static std::string mismatched_dir_;
};
std::string GenerateCliDecodingTest::adapter_dir_;
std::string GenerateCliDecodingTest::mismatched_dir_;

TEST_F(GenerateCliDecodingTest, SpeculativeModesReproduceTheReference) {
  const auto ref = testing::LoadStoriesReference().front();
  for (const std::string mode : {"lossless --gamma 4", "ngram --gamma 8", "lossy --gamma 4"}) {
    const auto r = RunCommand(Bin() + " --adapter " + adapter_dir_ + " --mode " + mode + " --max-new-tokens " +
                              std::to_string(ref.greedy_ids.size()) + " --ignore-eos --format jsonl");
    ASSERT_EQ(r.exit_code, 0) << mode << ": " << r.output;
    const auto j = nlohmann::json::parse(r.output, nullptr, false);
    ASSERT_FALSE(j.is_discarded()) << r.output;
    EXPECT_EQ(j["ids"].get<std::vector<int>>(), ref.greedy_ids) << mode;
    const auto forwards = j["forwards"].get<int64_t>();
    EXPECT_GT(forwards, 0);
    EXPECT_LE(forwards, static_cast<int64_t>(ref.greedy_ids.size()));
    EXPECT_GE(j["drafted"].get<int64_t>(), j["accepted"].get<int64_t>());
    EXPECT_NEAR(j["tokens_per_forward"].get<double>(), double(ref.greedy_ids.size()) / forwards, 1e-9);
  }
}

TEST_F(GenerateCliDecodingTest, OutOfRangeValuesNameTheFlag) {
  const std::string with_adapter = Bin() + " --adapter " + adapter_dir_;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {with_adapter + " --mode lossy --beta 1", "--beta"},
      {with_adapter + " --mode lossy --beta -0.1", "--beta"},
      {with_adapter + " --mode lossy --tau 0.5", "--tau"},
      {with_adapter + " --mode lossless --gamma 0", "--gamma"},
      {with_adapter + " --mode lossless --gamma 65", "--gamma"},
      {with_adapter + " --mode lossless --beta 0.3", "--beta"},
      {with_adapter + " --mode fast", "--mode"},
      {Bin() + " --mode lossless", "--adapter"},
      {Bin() + " --adapter " + mismatched_dir_ + " --mode lossless", "--adapter"},
      {Bin() + " --adapter /nonexistent/adapter --mode lossless", "/nonexistent/adapter"},
  };
  for (const auto& [cmd, needle] : cases) {
    const auto r = RunCommand(cmd);
    EXPECT_EQ(r.exit_code, 2) << cmd << "\n" << r.output;
    EXPECT_NE(r.output.find(needle), std::string::npos) << cmd << "\n" << r.output;
  }
}

}  // namespace
}  // namespace crossreg

namespace crossreg {
namespace {

// With no --model the CLI serves the embedded default model and its adapter.
TEST(GenerateCliDefaultModelTest, NoModelFlagUsesTheDefaultModelAndItsAdapter) {
  const auto r = RunCommand(testing::BinDir() + "/crossreg-generate --prompt 'def add(a, b):' --max-new-tokens 24 " +
                            "--mode lossless --gamma 4 --ignore-eos --format jsonl");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.output;
  EXPECT_NE(j["model"].get<std::string>().find("models/default"), std::string::npos) << j["model"];
  EXPECT_EQ(j["ids"].size(), 24u);
  EXPECT_GT(j["drafted"].get<int64_t>(), 0);  // lossless ran, so the bundled adapter loaded
  // Lossless greedy equals AR greedy on the default model too.
  const auto ar = RunCommand(testing::BinDir() + "/crossreg-generate --prompt 'def add(a, b):' --max-new-tokens 24 " +
                             "--ignore-eos --format jsonl");
  ASSERT_EQ(ar.exit_code, 0) << ar.output;
  EXPECT_EQ(nlohmann::json::parse(ar.output)["ids"], j["ids"]);
}

}  // namespace
}  // namespace crossreg
