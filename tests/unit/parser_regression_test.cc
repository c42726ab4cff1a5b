// Inputs that crash, hang or stall a loader written the obvious way, found by fuzzing
// (fuzz/) and by hardening the loaders: each must be refused or parsed quickly. The
// inputs that fit are also kept in fuzz/corpus/<target>/.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <future>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "engine/model/lora_adapter.h"
#include "engine/model/model_loader.h"
#include "engine/tokenizer/tokenizer.h"
#include "gmock/gmock.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/gguf_writer.h"
#include "tests/testing/hf_model_writer.h"
#include "tests/testing/tiny_gguf.h"

namespace crossreg {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

double SecondsOf(const std::function<void()>& f) {
  const auto start = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// 40000 added tokens starting with '<': built one sorted insertion at a time (a stable
// sort of every entry per token), they would take minutes. The bound is far from what a
// linear build takes anywhere (0.4 s in a Release build, 2.4 s under ASan on a 2-core Zen 1
// class host) and far below the quadratic one, so a slow or shared machine does not trip it.
TEST(ParserRegressionTest, ManyAddedTokensSharingAFirstByteBuildQuickly) {
  json j = {{"model", {{"type", "BPE"}, {"vocab", {{"a", 0}, {"b", 1}}}, {"merges", json::array()}}},
            {"pre_tokenizer", {{"type", "ByteLevel"}}},
            {"added_tokens", json::array()}};
  constexpr int kAdded = 40000;
  for (int i = 0; i < kAdded; ++i) {
    j["added_tokens"].push_back({{"id", i + 2}, {"content", "<t" + std::to_string(i) + ">"},
                                 {"special", i % 2 == 0}});
  }
  const std::string text = j.dump();
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer;
  const double seconds = SecondsOf([&] {
    auto spec = TokenizerSpecFromHfJsonText(text, "tokenizer.json");
    ASSERT_TRUE(spec.ok()) << spec.status();
    tokenizer = Tokenizer::Create(*std::move(spec));
  });
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_LT(seconds, 30.0);
  // Longest match still wins: "<t12345>" is one token, not "<t1" + ...
  EXPECT_EQ((*tokenizer)->Encode("<t12345>", false, /*parse_special=*/true),
            (std::vector<int32_t>{12347}));
}

// A SentencePiece-style merge "a b" with 300000 spaces: trying every split, copying both
// halves each time, is O(length^2), tens of seconds for one line.
TEST(ParserRegressionTest, MergeWithManySpacesParsesQuickly) {
  const json j = {
      {"model", {{"type", "BPE"},
                 {"byte_fallback", true},
                 {"vocab", {{"a", 0}, {"b", 1}, {"\xE2\x96\x81", 2}}},
                 {"merges", {"a" + std::string(300000, ' ') + "b"}}}},
      {"normalizer", {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}}}};
  const std::string text = j.dump();
  absl::StatusOr<TokenizerSpec> spec;
  EXPECT_LT(SecondsOf([&] { spec = TokenizerSpecFromHfJsonText(text, "tokenizer.json"); }), 1.0);
  EXPECT_TRUE(spec.ok()) << spec.status();
}

// Loads `load` in a thread; fails (and unblocks it by opening `fifo` for writing) if it
// has not returned within 10 s.
absl::Status LoadWithDeadline(const std::function<absl::Status()>& load, const std::string& fifo) {
  std::packaged_task<absl::Status()> task(load);
  std::future<absl::Status> result = task.get_future();
  std::thread thread(std::move(task));
  if (result.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    ADD_FAILURE() << "the loader blocked on the FIFO " << fifo;
    const int fd = ::open(fifo.c_str(), O_RDWR | O_NONBLOCK);  // lets the reader's open return
    if (fd >= 0) ::close(fd);
  }
  thread.join();
  return result.get();
}

// A FIFO where a file is expected blocks open() (and std::ifstream) forever, so the
// loaders refuse anything that is not a regular file.
TEST(ParserRegressionTest, FifoInPlaceOfAFileIsRefusedNotWaitedOn) {
  const std::string dir = testing::MakeTempDir("crossreg_fifo");
  ASSERT_EQ(::mkfifo((dir + "/adapter_config.json").c_str(), 0600), 0);
  ASSERT_TRUE(testing::WriteBytes(dir + "/adapter_model.safetensors", "").ok());
  ModelConfig base;
  base.vocab_size = 50;
  base.hidden_size = 16;
  base.intermediate_size = 24;
  base.num_layers = 1;
  base.num_heads = 4;
  base.num_kv_heads = 2;
  base.head_dim = 4;
  base.max_position = 64;
  absl::Status status = LoadWithDeadline(
      [&] { return LoadLoraAdapter(dir, base).status(); }, dir + "/adapter_config.json");
  EXPECT_THAT(std::string(status.message()), HasSubstr("not a regular file"));

  ASSERT_EQ(::mkfifo((dir + "/tokenizer.json").c_str(), 0600), 0);
  status = LoadWithDeadline([&] { return TokenizerSpecFromHfJson(dir + "/tokenizer.json").status(); },
                            dir + "/tokenizer.json");
  EXPECT_THAT(std::string(status.message()), HasSubstr("not a regular file"));

  ASSERT_EQ(::mkfifo((dir + "/model.gguf").c_str(), 0600), 0);
  status = LoadWithDeadline([&] { return LoadModel(dir + "/model.gguf").status(); }, dir + "/model.gguf");
  EXPECT_THAT(std::string(status.message()), HasSubstr("not a regular file"));
  std::filesystem::remove_all(dir);
}

ModelConfig TinyAdapterBase() {
  ModelConfig base;
  base.vocab_size = 50;
  base.hidden_size = 16;
  base.intermediate_size = 24;
  base.num_layers = 1;
  base.num_heads = 4;
  base.num_kv_heads = 2;
  base.head_dim = 4;
  base.max_position = 64;
  return base;
}

std::string Nested(int depth) { return std::string(depth, '[') + std::string(depth, ']'); }

// Copying a parsed JSON value, or dumping it into a message, recurses once per level:
// 200000 levels overflow the stack (SIGSEGV) where a loader would dump adapter_config.json's
// lora_alpha, copy its layers_to_transform, or copy generation_config.json's eos_token_id.
TEST(ParserRegressionTest, DeeplyNestedJsonValuesDoNotOverflowTheStack) {
  const std::string dir = testing::MakeTempDir("crossreg_nested");
  ASSERT_TRUE(testing::WriteBytes(dir + "/adapter_model.safetensors", std::string(8, '\0')).ok());
  for (const char* key : {"lora_alpha", "layers_to_transform", "rank_pattern"}) {
    SCOPED_TRACE(key);
    // StrCat rather than operator+ chains: g++ 12 warns falsely (-Wrestrict) on those.
    const std::string nested = Nested(200000);
    const std::string value = std::string(key) == "rank_pattern" ? absl::StrCat("{\"q_proj\": ", nested, "}")
                                                                 : absl::StrCat("[", nested, "]");
    ASSERT_TRUE(testing::WriteBytes(dir + "/adapter_config.json",
                                    absl::StrCat(R"({"r": 2, "target_modules": "all-linear", ")", key, "\": ", value,
                                                 "}"))
                    .ok());
    const absl::Status status = LoadLoraAdapter(dir, TinyAdapterBase()).status();
    EXPECT_THAT(std::string(status.message()), HasSubstr(key));
  }
  std::filesystem::remove_all(dir);
}

TEST(ParserRegressionTest, DeeplyNestedGenerationConfigDoesNotOverflowTheStack) {
  const std::string dir = testing::MakeTempDir("crossreg_nested_hf");
  const testing::GgufWriter w = testing::TinyLlamaGguf(testing::TinyVocab::kSentencePiece);
  ASSERT_TRUE(w.WriteFile(dir + "/tiny.gguf").ok());
  ASSERT_TRUE(testing::WriteHfModelFromGguf(dir + "/tiny.gguf", dir, 1, DType::kF32).ok());
  ASSERT_TRUE(LoadModel(dir).ok());
  ASSERT_TRUE(testing::WriteBytes(dir + "/generation_config.json",
                                  "{\"eos_token_id\": [" + Nested(200000) + "]}").ok());
  const absl::Status status = LoadModel(dir).status();
  EXPECT_THAT(std::string(status.message()), HasSubstr("eos_token_id"));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace crossreg
