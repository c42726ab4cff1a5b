#include "tests/testing/hf_model_writer.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/io/gguf_file.h"
#include "engine/model/model_config_parse.h"
#include "engine/status_macros.h"
#include "engine/tokenizer/tokenizer.h"
#include "tests/testing/gguf_writer.h"
#include "engine/io/safetensors_writer.h"
#include "tests/testing/hf_tokenizer_writer.h"

namespace crossreg::testing {
namespace {

using json = nlohmann::json;

// GGUF tensor name -> HF name; empty if unknown.
std::string HfName(const std::string& gguf) {
  static const std::map<std::string, std::string> kGlobal = {
      {"token_embd.weight", "model.embed_tokens.weight"},
      {"output_norm.weight", "model.norm.weight"},
      {"output.weight", "lm_head.weight"},
  };
  if (auto it = kGlobal.find(gguf); it != kGlobal.end()) return it->second;
  static const std::map<std::string, std::string> kLayer = {
      {"attn_norm.weight", "input_layernorm.weight"},
      {"attn_q.weight", "self_attn.q_proj.weight"},
      {"attn_k.weight", "self_attn.k_proj.weight"},
      {"attn_v.weight", "self_attn.v_proj.weight"},
      {"attn_output.weight", "self_attn.o_proj.weight"},
      {"ffn_norm.weight", "post_attention_layernorm.weight"},
      {"ffn_gate.weight", "mlp.gate_proj.weight"},
      {"ffn_up.weight", "mlp.up_proj.weight"},
      {"ffn_down.weight", "mlp.down_proj.weight"},
  };
  int layer = -1, consumed = 0;
  if (std::sscanf(gguf.c_str(), "blk.%d.%n", &layer, &consumed) != 1 || consumed == 0) return "";
  auto it = kLayer.find(gguf.substr(consumed));
  if (it == kLayer.end()) return "";
  return absl::StrCat("model.layers.", layer, ".", it->second);
}

// Tensor values as float32, whatever the stored type.
std::vector<float> ToF32(const TensorRef& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  ConvertToF32(t.dtype, t.data, out.data(), out.size());
  return out;
}

// HF's permute(): view (heads, head_dim/2, 2, cols) -> transpose(1, 2).
std::vector<float> MetaToHf(const std::vector<float>& w, int64_t rows, int64_t cols,
                            int64_t head_dim) {
  std::vector<float> out(w.size());
  const int64_t half = head_dim / 2;
  for (int64_t head = 0; head < rows / head_dim; ++head) {
    for (int64_t h = 0; h < 2; ++h) {
      for (int64_t i = 0; i < half; ++i) {
        const int64_t dst = head * head_dim + h * half + i;
        const int64_t src = head * head_dim + 2 * i + h;
        std::copy_n(w.begin() + src * cols, cols, out.begin() + dst * cols);
      }
    }
  }
  return out;
}

std::string Encode(const std::vector<float>& v, DType dtype) {
  std::string bytes(v.size() * DTypeSize(dtype), '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    if (dtype == DType::kF32) {
      std::memcpy(&bytes[i * 4], &v[i], 4);
    } else {
      const uint16_t h = dtype == DType::kF16 ? F32ToF16(v[i]) : F32ToBf16(v[i]);
      std::memcpy(&bytes[i * 2], &h, 2);
    }
  }
  return bytes;
}

json ConfigJson(const ModelConfig& c, bool tied, DType dtype) {
  json j = {
      {"architectures", {"LlamaForCausalLM"}},
      {"model_type", "llama"},
      {"hidden_act", "silu"},
      {"hidden_size", c.hidden_size},
      {"intermediate_size", c.intermediate_size},
      {"num_hidden_layers", c.num_layers},
      {"num_attention_heads", c.num_heads},
      {"num_key_value_heads", c.num_kv_heads},
      {"head_dim", c.head_dim},
      {"max_position_embeddings", c.max_position},
      {"rms_norm_eps", c.rms_norm_eps},
      {"rope_theta", c.rope_theta},
      {"vocab_size", c.vocab_size},
      {"tie_word_embeddings", tied},
      {"attention_bias", false},
      {"torch_dtype", dtype == DType::kF32 ? "float32" : dtype == DType::kF16 ? "float16" : "bfloat16"},
  };
  j["rope_scaling"] = nullptr;
  if (c.rope_scaling.type == RopeScaling::Type::kLinear) {
    j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", c.rope_scaling.factor}};
  }
  if (c.bos_token_id >= 0) j["bos_token_id"] = c.bos_token_id;
  if (!c.eos_token_ids.empty()) j["eos_token_id"] = c.eos_token_ids.front();
  return j;
}

}  // namespace

absl::Status WriteHfModelFromGguf(const std::string& gguf_path, const std::string& out_dir,
                                  int num_shards, DType dtype) {
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> gguf, GgufFile::Open(gguf_path));
  ASSIGN_OR_RETURN(ModelConfig config, ModelConfigFromGguf(gguf->metadata()));
  if (config.arch != Architecture::kLlama) {
    return absl::UnimplementedError("WriteHfModelFromGguf: only llama GGUF files");
  }
  if (gguf->FindTensor("rope_freqs.weight") != nullptr) {
    return absl::UnimplementedError("WriteHfModelFromGguf: rope_freqs.weight is not converted");
  }
  if (num_shards < 1) return absl::InvalidArgumentError("num_shards must be >= 1");
  const bool tied = gguf->FindTensor("output.weight") == nullptr;

  std::vector<SafetensorsEntry> entries;
  for (const GgufTensorInfo& t : gguf->tensors()) {
    const std::string name = HfName(t.name);
    if (name.empty()) {
      return absl::UnimplementedError(absl::StrCat("WriteHfModelFromGguf: unknown tensor ", t.name));
    }
    std::vector<float> values = ToF32(t.ref);
    const bool is_q = name.ends_with("q_proj.weight"), is_k = name.ends_with("k_proj.weight");
    if (is_q || is_k) values = MetaToHf(values, t.ref.rows(), t.ref.cols(), config.head_dim);
    entries.push_back({name, std::string(DTypeName(dtype)), t.shape, Encode(values, dtype)});
  }

  // Shards: contiguous runs of tensors, as even as the count allows.
  json weight_map = json::object();
  uint64_t total_size = 0;
  const size_t per_shard = (entries.size() + num_shards - 1) / num_shards;
  for (int s = 0; s < num_shards; ++s) {
    const size_t begin = std::min(entries.size(), s * per_shard);
    const size_t end = std::min(entries.size(), begin + per_shard);
    std::vector<SafetensorsEntry> shard(entries.begin() + begin, entries.begin() + end);
    const std::string file = num_shards == 1
                                 ? std::string("model.safetensors")
                                 : absl::StrFormat("model-%05d-of-%05d.safetensors", s + 1, num_shards);
    for (const SafetensorsEntry& e : shard) {
      weight_map[e.name] = file;
      total_size += e.bytes.size();
    }
    RETURN_IF_ERROR(WriteSafetensors(out_dir + "/" + file, shard, {{"format", "pt"}}));
  }
  if (num_shards > 1) {
    const json index = {{"metadata", {{"total_size", total_size}}}, {"weight_map", weight_map}};
    RETURN_IF_ERROR(WriteBytes(out_dir + "/model.safetensors.index.json", index.dump(2)));
  }
  RETURN_IF_ERROR(WriteBytes(out_dir + "/config.json", ConfigJson(config, tied, dtype).dump(2)));

  json generation = {{"_from_model_config", true},
                     {"do_sample", true},
                     {"temperature", kHfWriterTemperature},
                     {"top_p", kHfWriterTopP},
                     {"top_k", kHfWriterTopK}};
  if (config.bos_token_id >= 0) generation["bos_token_id"] = config.bos_token_id;
  if (!config.eos_token_ids.empty()) generation["eos_token_id"] = config.eos_token_ids;
  RETURN_IF_ERROR(WriteBytes(out_dir + "/generation_config.json", generation.dump(2)));

  ASSIGN_OR_RETURN(TokenizerSpec spec, TokenizerSpecFromGguf(gguf->metadata()));
  return WriteHfTokenizerJson(spec, out_dir + "/tokenizer.json");
}

}  // namespace crossreg::testing
