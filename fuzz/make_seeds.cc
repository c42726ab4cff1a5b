// Writes valid seed inputs for every fuzz target into OUT_DIR/<target>/, built with the
// writers the tests use (tests/testing, engine/model/peft_writer.h):
//   crossreg-fuzz-seeds OUT_DIR
// fuzz_gguf: tiny llama GGUFs (SentencePiece and byte-level vocabularies);
// fuzz_safetensors: their Hugging Face shards in F32, F16 and BF16, and an adapter's;
// fuzz_tokenizer_json / fuzz_config_json: the Hugging Face files of those models, and
// variants of each (pre-tokenizers, architectures, RoPE scaling);
// fuzz_adapter: PEFT adapters for fuzz_base_model.h, packed as fuzz_input.h describes;
// fuzz_request / fuzz_openai_request: make_request_seeds.cc (built with protobuf).
#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/decoding/ngram_table.h"
#include "engine/io/gguf_file.h"
#include "engine/model/lora_adapter.h"
#include "engine/model/peft_writer.h"
#include "engine/status_macros.h"
#include "engine/tokenizer/tokenizer.h"
#include "fuzz/fuzz_base_model.h"
#include "fuzz/fuzz_input.h"
#include "fuzz/seed_writer.h"
#include "tests/testing/gguf_writer.h"
#include "tests/testing/hf_model_writer.h"
#include "tests/testing/hf_tokenizer_writer.h"
#include "tests/testing/tiny_gguf.h"

namespace crossreg::fuzz {
namespace {

using json = nlohmann::json;
using testing::ReadBytes;

// A GGUF model, its Hugging Face directory and the seeds cut from them.
absl::Status ModelSeeds(SeedWriter& seeds, const std::string& scratch, testing::TinyVocab vocab,
                        const std::string& tag) {
  const std::string gguf_path = absl::StrCat(scratch, "/", tag, ".gguf");
  const testing::GgufWriter gguf = testing::TinyLlamaGguf(vocab);
  RETURN_IF_ERROR(gguf.WriteFile(gguf_path));
  RETURN_IF_ERROR(seeds.Add("fuzz_gguf", tag + ".gguf", gguf.Serialize()));

  for (DType dtype : {DType::kF32, DType::kBF16, DType::kF16}) {
    const std::string dir = absl::StrCat(scratch, "/", tag, "_hf_", std::string(DTypeName(dtype)));
    std::filesystem::create_directories(dir);
    RETURN_IF_ERROR(testing::WriteHfModelFromGguf(gguf_path, dir, /*num_shards=*/2, dtype));
    for (const char* shard : {"model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"}) {
      ASSIGN_OR_RETURN(std::string bytes, ReadBytes(absl::StrCat(dir, "/", shard)));
      RETURN_IF_ERROR(seeds.Add("fuzz_safetensors", absl::StrCat(tag, "_", std::string(DTypeName(dtype)), "_", shard), bytes));
    }
    if (dtype != DType::kF32) continue;
    ASSIGN_OR_RETURN(std::string config, ReadBytes(dir + "/config.json"));
    RETURN_IF_ERROR(seeds.Add("fuzz_config_json", tag + "_config.json", config));
    ASSIGN_OR_RETURN(std::string tokenizer, ReadBytes(dir + "/tokenizer.json"));
    RETURN_IF_ERROR(seeds.Add("fuzz_tokenizer_json", tag + "_tokenizer.json", tokenizer));
  }

  // The byte-level vocabulary with each pre-tokenizer regex.
  if (vocab == testing::TinyVocab::kByteLevel) {
    ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(gguf_path));
    ASSIGN_OR_RETURN(TokenizerSpec spec, TokenizerSpecFromGguf(file->metadata()));
    for (auto [pre, name] : {std::pair{TokenizerSpec::PreTokenizer::kLlama3, "llama3"},
                             std::pair{TokenizerSpec::PreTokenizer::kQwen2, "qwen2"}}) {
      spec.pre = pre;
      const std::string path = absl::StrCat(scratch, "/tokenizer_", name, ".json");
      RETURN_IF_ERROR(testing::WriteHfTokenizerJson(spec, path));
      ASSIGN_OR_RETURN(std::string bytes, ReadBytes(path));
      RETURN_IF_ERROR(seeds.Add("fuzz_tokenizer_json", absl::StrCat(tag, "_", name, ".json"), bytes));
    }
  }
  return absl::OkStatus();
}

// config.json variants: other architectures and the RoPE scalings the parser knows.
absl::Status ConfigSeeds(SeedWriter& seeds) {
  const json base = {{"model_type", "llama"},         {"hidden_size", 64},
                     {"intermediate_size", 172},      {"num_hidden_layers", 2},
                     {"num_attention_heads", 8},      {"num_key_value_heads", 4},
                     {"max_position_embeddings", 512}, {"rms_norm_eps", 1e-5},
                     {"vocab_size", 512},             {"bos_token_id", 1},
                     {"eos_token_id", 2}};
  std::vector<std::pair<std::string, json>> variants;
  json llama3 = base;
  llama3["rope_theta"] = 500000.0;
  llama3["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                            {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 256}};
  llama3["eos_token_id"] = {2, 3};
  variants.emplace_back("llama3", llama3);
  json linear = base;
  linear["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  linear["head_dim"] = 16;
  variants.emplace_back("linear", linear);
  json qwen2 = base;
  qwen2["model_type"] = "qwen2";
  qwen2["use_sliding_window"] = true;
  qwen2["sliding_window"] = 128;
  qwen2["tie_word_embeddings"] = true;
  variants.emplace_back("qwen2", qwen2);
  json mistral = base;
  mistral.erase("model_type");
  mistral["architectures"] = {"MistralForCausalLM"};
  mistral["sliding_window"] = nullptr;
  variants.emplace_back("mistral", mistral);
  for (const auto& [name, j] : variants) {
    RETURN_IF_ERROR(seeds.Add("fuzz_config_json", name + ".json", j.dump(1)));
  }
  return absl::OkStatus();
}

// PEFT adapters for AdapterBaseModel(): all targets, mixed ranks and scales (rank_pattern,
// alpha_pattern), a subset of layers, F16 weights, and one without crossreg_adapter.json.
absl::Status AdapterSeeds(SeedWriter& seeds, const std::string& scratch) {
  const ModelConfig& base = AdapterBaseModel();
  struct Variant {
    std::string name;
    LoraAdapter adapter;
    DType dtype = DType::kF32;
    bool drop_crossreg = false;
  };
  std::vector<Variant> variants;
  RandomLoraOptions options;
  options.rank = 2;
  options.placeholder_token_id = 49;
  options.window = 16;
  variants.push_back({"all_targets", *MakeRandomLoraAdapter(base, options)});
  {
    LoraAdapter mixed = *MakeRandomLoraAdapter(base, options);
    options.rank = 3;
    options.alpha = 5.0f;
    const auto wide = MakeRandomLoraAdapter(base, options);
    for (size_t l = 0; l < mixed.layers.size(); ++l) {
      mixed.layers[l].at(LoraTarget::kDown) = wide->layers[l].at(LoraTarget::kDown);
    }
    mixed.max_rank = 3;
    variants.push_back({"mixed_ranks", std::move(mixed)});
  }
  {
    LoraAdapter one_layer = *MakeRandomLoraAdapter(base, options);
    one_layer.layers[0] = LoraLayer{};
    variants.push_back({"one_layer", std::move(one_layer), DType::kF16});
  }
  variants.push_back({"no_crossreg_json", *MakeRandomLoraAdapter(base, options), DType::kBF16, true});
  for (Variant& v : variants) {
    const std::string dir = absl::StrCat(scratch, "/adapter_", v.name);
    std::filesystem::create_directories(dir);
    RETURN_IF_ERROR(WritePeftAdapter(v.adapter, base, dir, v.dtype));
    ASSIGN_OR_RETURN(std::string config, ReadBytes(dir + "/adapter_config.json"));
    ASSIGN_OR_RETURN(std::string crossreg, ReadBytes(dir + "/crossreg_adapter.json"));
    ASSIGN_OR_RETURN(std::string weights, ReadBytes(dir + "/adapter_model.safetensors"));
    std::optional<std::string> maybe_crossreg = crossreg;
    if (v.drop_crossreg) maybe_crossreg.reset();
    RETURN_IF_ERROR(seeds.Add("fuzz_adapter", v.name, JoinParts({config, maybe_crossreg, weights})));
    RETURN_IF_ERROR(seeds.Add("fuzz_safetensors", absl::StrCat("adapter_", v.name), weights));
  }
  return absl::OkStatus();
}

// Two small corpus n-gram tables: orders 2-3 with entries, and an empty order-1 one.
absl::Status NgramTableSeeds(SeedWriter& seeds) {
  std::vector<NgramTable::Order> orders(3);
  orders[1].keys = {(1u << 6) | 2, (4u << 6) | 5};
  orders[1].next = {3, 6};
  orders[2].keys = {(uint64_t{7} << 12) | (1u << 6) | 2};
  orders[2].next = {9};
  ASSIGN_OR_RETURN(auto table, NgramTable::FromOrders(64, 6, std::move(orders)));
  RETURN_IF_ERROR(seeds.Add("fuzz_ngram_table", "orders_2_3", table->Serialize()));
  ASSIGN_OR_RETURN(auto empty, NgramTable::FromOrders(64, 6, std::vector<NgramTable::Order>(1)));
  return seeds.Add("fuzz_ngram_table", "empty", empty->Serialize());
}

absl::Status WriteAll(const std::string& out) {
  const std::string scratch = absl::StrCat(out, "/.scratch");
  std::filesystem::remove_all(scratch);
  std::filesystem::create_directories(scratch);
  SeedWriter seeds(out);
  RETURN_IF_ERROR(ModelSeeds(seeds, scratch, testing::TinyVocab::kSentencePiece, "spm"));
  RETURN_IF_ERROR(ModelSeeds(seeds, scratch, testing::TinyVocab::kByteLevel, "bytelevel"));
  RETURN_IF_ERROR(ConfigSeeds(seeds));
  RETURN_IF_ERROR(AdapterSeeds(seeds, scratch));
  RETURN_IF_ERROR(NgramTableSeeds(seeds));
#ifdef CROSSREG_FUZZ_REQUESTS
  RETURN_IF_ERROR(WriteRequestSeeds(seeds));
#endif
  std::filesystem::remove_all(scratch);
  std::printf("crossreg-fuzz-seeds: %d seeds in %s\n", seeds.count(), out.c_str());
  return absl::OkStatus();
}

}  // namespace
}  // namespace crossreg::fuzz

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT_DIR\n", argv[0]);
    return 2;
  }
  const absl::Status status = crossreg::fuzz::WriteAll(argv[1]);
  if (!status.ok()) {
    std::fprintf(stderr, "crossreg-fuzz-seeds: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
