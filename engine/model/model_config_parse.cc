#include "engine/model/model_config_parse.h"

#include <cmath>
#include <limits>
#include <optional>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/io/mapped_file.h"
#include "engine/status_macros.h"

namespace crossreg {
namespace {

using json = nlohmann::json;

// ---- GGUF -------------------------------------------------------------------

absl::Status GgufKeyError(const absl::Status& s) {
  return absl::InvalidArgumentError(absl::StrCat("GGUF model config: ", s.message()));
}

absl::StatusOr<int> GgufInt(const GgufMetadata& md, const std::string& key) {
  auto v = md.GetInt(key);
  if (!v.ok()) return GgufKeyError(v.status());
  if (*v < std::numeric_limits<int>::min() || *v > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF model config: key '", key, "' value ", *v, " is out of range"));
  }
  return static_cast<int>(*v);
}

absl::StatusOr<int> GgufIntOr(const GgufMetadata& md, const std::string& key, int fallback) {
  if (!md.Has(key)) return fallback;
  return GgufInt(md, key);
}

absl::StatusOr<float> GgufFloatOr(const GgufMetadata& md, const std::string& key,
                                  std::optional<float> fallback) {
  if (!md.Has(key) && fallback.has_value()) return *fallback;
  auto v = md.GetFloat(key);
  if (!v.ok()) return GgufKeyError(v.status());
  // f64 values past float's range would make the conversion undefined.
  if (std::isfinite(*v) && std::fabs(*v) > std::numeric_limits<float>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF model config: key '", key, "' value ", *v, " is out of range"));
  }
  return static_cast<float>(*v);
}

// ---- config.json ------------------------------------------------------------

// Typed access to one JSON object; errors name the file and the key.
class JsonFields {
 public:
  JsonFields(const std::string& path, const json& j, std::string prefix = "")
      : path_(path), j_(j), prefix_(std::move(prefix)) {}

  bool HasNonNull(const char* key) const {
    auto it = j_.find(key);
    return it != j_.end() && !it->is_null();
  }
  const json* Get(const char* key) const {
    auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }

  absl::Status Error(const char* key, const std::string& problem) const {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": key '", prefix_, key, "' ", problem));
  }

  absl::StatusOr<int> Int(const char* key, std::optional<int> fallback = std::nullopt) const {
    const json* v = Get(key);
    if (v == nullptr) {
      if (fallback.has_value()) return *fallback;
      return Error(key, "is missing");
    }
    return AsInt(key, *v);
  }

  absl::StatusOr<int> AsInt(const char* key, const json& v) const {
    if (!v.is_number_integer()) return Error(key, absl::StrCat("must be an integer, got ", v.type_name()));
    const int64_t i = v.get<int64_t>();
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(INT32_MAX)) {
      return Error(key, "is out of range");
    }
    if (i < std::numeric_limits<int>::min() || i > std::numeric_limits<int>::max()) {
      return Error(key, "is out of range");
    }
    return static_cast<int>(i);
  }

  absl::StatusOr<float> Float(const char* key, std::optional<float> fallback = std::nullopt) const {
    const json* v = Get(key);
    if (v == nullptr) {
      if (fallback.has_value()) return *fallback;
      return Error(key, "is missing");
    }
    if (!v->is_number()) return Error(key, absl::StrCat("must be a number, got ", v->type_name()));
    const double d = v->get<double>();
    if (!std::isfinite(d) || std::fabs(d) > std::numeric_limits<float>::max()) {
      return Error(key, "is out of range");
    }
    return static_cast<float>(d);
  }

  absl::StatusOr<bool> Bool(const char* key, bool fallback) const {
    const json* v = Get(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) return Error(key, absl::StrCat("must be a boolean, got ", v->type_name()));
    return v->get<bool>();
  }

  absl::StatusOr<std::string> String(const char* key, std::optional<std::string> fallback) const {
    const json* v = Get(key);
    if (v == nullptr) {
      if (fallback.has_value()) return *fallback;
      return Error(key, "is missing");
    }
    if (!v->is_string()) return Error(key, absl::StrCat("must be a string, got ", v->type_name()));
    return v->get<std::string>();
  }

 private:
  const std::string& path_;
  const json& j_;
  std::string prefix_;
};

absl::StatusOr<Architecture> HfArchitecture(const JsonFields& f) {
  ASSIGN_OR_RETURN(std::string model_type, f.String("model_type", std::string()));
  if (model_type.empty()) {
    // Older configs only name the class.
    const json* archs = f.Get("architectures");
    if (archs == nullptr) return f.Error("model_type", "is missing (and no 'architectures')");
    if (!archs->is_array() || archs->empty() || !(*archs)[0].is_string()) {
      return f.Error("architectures", "must be a non-empty array of strings");
    }
    const std::string cls = (*archs)[0].get<std::string>();
    if (cls == "LlamaForCausalLM") return Architecture::kLlama;
    if (cls == "MistralForCausalLM") return Architecture::kMistral;
    if (cls == "Qwen2ForCausalLM") return Architecture::kQwen2;
    return f.Error("architectures", absl::StrCat("names unsupported architecture '", cls,
                                                 "' (supported: LlamaForCausalLM, "
                                                 "MistralForCausalLM, Qwen2ForCausalLM)"));
  }
  if (model_type == "llama") return Architecture::kLlama;
  if (model_type == "mistral") return Architecture::kMistral;
  if (model_type == "qwen2") return Architecture::kQwen2;
  return f.Error("model_type", absl::StrCat("names unsupported architecture '", model_type,
                                            "' (supported: llama, mistral, qwen2)"));
}

// "crossreg_draft": the model drafts for itself (training/pretrain.py --hybrid).
absl::Status ParseHfSelfDraft(const std::string& path, const JsonFields& f, ModelConfig& c) {
  const json* d = f.Get("crossreg_draft");
  if (d == nullptr) return absl::OkStatus();
  if (!d->is_object()) return f.Error("crossreg_draft", "must be an object or null");
  JsonFields s(path, *d, "crossreg_draft.");
  ASSIGN_OR_RETURN(c.draft_placeholder, s.Int("placeholder_token_id"));
  if (c.draft_placeholder < 0 || c.draft_placeholder >= c.vocab_size) {
    return s.Error("placeholder_token_id", absl::StrCat("must be in [0, ", c.vocab_size, "), got ",
                                                        c.draft_placeholder));
  }
  ASSIGN_OR_RETURN(c.draft_layout, s.String("draft_layout", std::string("chain")));
  if (c.draft_layout != "chain" && c.draft_layout != "blocks") {
    return s.Error("draft_layout", absl::StrCat("must be \"chain\" or \"blocks\", got \"",
                                                c.draft_layout.substr(0, 64), "\""));
  }
  if (s.HasNonNull("block_rows")) {
    ASSIGN_OR_RETURN(c.draft_block_rows, s.Int("block_rows"));
    if (c.draft_block_rows < 1 || c.draft_block_rows > ModelConfig::kMaxDraftBlockRows) {
      return s.Error("block_rows", absl::StrCat("must be in [1, ", ModelConfig::kMaxDraftBlockRows, "], got ", c.draft_block_rows));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseHfRopeScaling(const std::string& path, const JsonFields& f, RopeScaling& out) {
  const json* rs = f.Get("rope_scaling");
  if (rs == nullptr) return absl::OkStatus();
  if (!rs->is_object()) return f.Error("rope_scaling", "must be an object or null");
  JsonFields s(path, *rs, "rope_scaling.");
  std::string type;
  if (s.HasNonNull("rope_type")) {
    ASSIGN_OR_RETURN(type, s.String("rope_type", std::nullopt));
  } else {
    ASSIGN_OR_RETURN(type, s.String("type", std::nullopt));
  }
  if (type == "default") return absl::OkStatus();
  if (type == "linear") {
    out.type = RopeScaling::Type::kLinear;
    ASSIGN_OR_RETURN(out.factor, s.Float("factor"));
    return absl::OkStatus();
  }
  if (type == "llama3") {
    out.type = RopeScaling::Type::kLlama3;
    ASSIGN_OR_RETURN(out.factor, s.Float("factor"));
    ASSIGN_OR_RETURN(out.low_freq_factor, s.Float("low_freq_factor"));
    ASSIGN_OR_RETURN(out.high_freq_factor, s.Float("high_freq_factor"));
    ASSIGN_OR_RETURN(out.original_max_position, s.Int("original_max_position_embeddings"));
    return absl::OkStatus();
  }
  return f.Error("rope_scaling", absl::StrCat("has unsupported type '", type,
                                              "' (supported: linear, llama3)"));
}

absl::Status ParseHfEos(const JsonFields& f, std::vector<int>& out) {
  const json* eos = f.Get("eos_token_id");
  if (eos == nullptr) return absl::OkStatus();
  if (eos->is_array()) {
    for (const json& e : *eos) {
      ASSIGN_OR_RETURN(int id, f.AsInt("eos_token_id", e));
      out.push_back(id);
    }
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(int id, f.AsInt("eos_token_id", *eos));
  out.push_back(id);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ModelConfig> ModelConfigFromGguf(const GgufMetadata& md) {
  ModelConfig c;
  auto arch_name = md.GetString("general.architecture");
  if (!arch_name.ok()) return GgufKeyError(arch_name.status());
  if (*arch_name == "llama") {
    c.arch = Architecture::kLlama;
  } else if (*arch_name == "qwen2") {
    c.arch = Architecture::kQwen2;
    c.qkv_bias = true;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "GGUF model config: unsupported architecture '", *arch_name,
        "' in general.architecture (supported: llama, qwen2)"));
  }
  const std::string p = *arch_name + ".";
  ASSIGN_OR_RETURN(c.max_position, GgufInt(md, p + "context_length"));
  ASSIGN_OR_RETURN(c.hidden_size, GgufInt(md, p + "embedding_length"));
  ASSIGN_OR_RETURN(c.num_layers, GgufInt(md, p + "block_count"));
  ASSIGN_OR_RETURN(c.intermediate_size, GgufInt(md, p + "feed_forward_length"));
  ASSIGN_OR_RETURN(c.num_heads, GgufInt(md, p + "attention.head_count"));
  ASSIGN_OR_RETURN(c.num_kv_heads, GgufIntOr(md, p + "attention.head_count_kv", c.num_heads));
  ASSIGN_OR_RETURN(c.rms_norm_eps, GgufFloatOr(md, p + "attention.layer_norm_rms_epsilon", std::nullopt));
  ASSIGN_OR_RETURN(c.rope_theta, GgufFloatOr(md, p + "rope.freq_base", 10000.0f));

  if (c.num_heads <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("GGUF model config: ", p,
                                                   "attention.head_count must be positive"));
  }
  const int default_head_dim = c.hidden_size / c.num_heads;
  ASSIGN_OR_RETURN(c.head_dim, GgufIntOr(md, p + "attention.key_length", default_head_dim));
  ASSIGN_OR_RETURN(int value_length, GgufIntOr(md, p + "attention.value_length", c.head_dim));
  if (value_length != c.head_dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GGUF model config: ", p, "attention.value_length ", value_length,
        " differs from key_length ", c.head_dim, " (unsupported)"));
  }
  ASSIGN_OR_RETURN(int rope_dims, GgufIntOr(md, p + "rope.dimension_count", c.head_dim));
  if (rope_dims != c.head_dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GGUF model config: ", p, "rope.dimension_count ", rope_dims,
        " differs from head_dim ", c.head_dim, " (partial rotary embeddings are unsupported)"));
  }

  if (md.Has(p + "vocab_size")) {
    ASSIGN_OR_RETURN(c.vocab_size, GgufInt(md, p + "vocab_size"));
  } else if (const GgufValue* tokens = md.Find("tokenizer.ggml.tokens");
             tokens != nullptr && tokens->kind == GgufValue::Kind::kArray) {
    c.vocab_size = static_cast<int>(std::min<size_t>(tokens->array_strings.size(), INT32_MAX));
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "GGUF model config: neither ", p, "vocab_size nor tokenizer.ggml.tokens is present"));
  }

  if (md.Has(p + "rope.scaling.type")) {
    auto type = md.GetString(p + "rope.scaling.type");
    if (!type.ok()) return GgufKeyError(type.status());
    if (*type == "linear") {
      c.rope_scaling.type = RopeScaling::Type::kLinear;
      ASSIGN_OR_RETURN(c.rope_scaling.factor, GgufFloatOr(md, p + "rope.scaling.factor", std::nullopt));
    } else if (*type != "none") {
      return absl::InvalidArgumentError(absl::StrCat(
          "GGUF model config: unsupported ", p, "rope.scaling.type '", *type,
          "' (supported: none, linear)"));
    }
  } else if (md.Has(p + "rope.scale_linear")) {  // older files
    ASSIGN_OR_RETURN(float factor, GgufFloatOr(md, p + "rope.scale_linear", std::nullopt));
    if (factor != 1.0f) {
      c.rope_scaling.type = RopeScaling::Type::kLinear;
      c.rope_scaling.factor = factor;
    }
  }

  ASSIGN_OR_RETURN(c.bos_token_id, GgufIntOr(md, "tokenizer.ggml.bos_token_id", -1));
  ASSIGN_OR_RETURN(int eos, GgufIntOr(md, "tokenizer.ggml.eos_token_id", -1));
  if (eos >= 0) c.eos_token_ids.push_back(eos);
  // Chat models end a turn with EOT, which may differ from EOS.
  ASSIGN_OR_RETURN(int eot, GgufIntOr(md, "tokenizer.ggml.eot_token_id", -1));
  if (eot >= 0 && eot != eos) c.eos_token_ids.push_back(eot);

  RETURN_IF_ERROR(c.Validate());
  return c;
}

absl::StatusOr<ModelConfig> ModelConfigFromHfJson(const std::string& path) {
  ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> file, MappedFile::Open(path));
  return ModelConfigFromHfJsonText(
      std::string_view(reinterpret_cast<const char*>(file->data()), file->size()), path);
}

absl::StatusOr<ModelConfig> ModelConfigFromHfJsonText(std::string_view text,
                                                      const std::string& path) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(path, ": not valid JSON"));
  if (!j.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  JsonFields f(path, j);

  ModelConfig c;
  ASSIGN_OR_RETURN(c.arch, HfArchitecture(f));
  c.qkv_bias = c.arch == Architecture::kQwen2;

  ASSIGN_OR_RETURN(std::string act, f.String("hidden_act", std::string("silu")));
  if (act != "silu") {
    return f.Error("hidden_act", absl::StrCat("names unsupported activation '", act,
                                              "' (supported: silu)"));
  }
  ASSIGN_OR_RETURN(c.vocab_size, f.Int("vocab_size"));
  ASSIGN_OR_RETURN(c.hidden_size, f.Int("hidden_size"));
  ASSIGN_OR_RETURN(c.intermediate_size, f.Int("intermediate_size"));
  ASSIGN_OR_RETURN(c.num_layers, f.Int("num_hidden_layers"));
  ASSIGN_OR_RETURN(c.num_heads, f.Int("num_attention_heads"));
  ASSIGN_OR_RETURN(c.num_kv_heads, f.Int("num_key_value_heads", c.num_heads));
  if (c.num_heads <= 0) return f.Error("num_attention_heads", "must be positive");
  if (f.HasNonNull("head_dim")) {
    ASSIGN_OR_RETURN(c.head_dim, f.Int("head_dim"));
  } else {
    if (c.hidden_size % c.num_heads != 0) {
      return f.Error("hidden_size", absl::StrCat("(", c.hidden_size,
                                                 ") is not divisible by num_attention_heads (",
                                                 c.num_heads, ") and head_dim is not given"));
    }
    c.head_dim = c.hidden_size / c.num_heads;
  }
  ASSIGN_OR_RETURN(c.max_position, f.Int("max_position_embeddings"));
  ASSIGN_OR_RETURN(c.rms_norm_eps, f.Float("rms_norm_eps"));
  ASSIGN_OR_RETURN(c.rope_theta, f.Float("rope_theta", 10000.0f));
  RETURN_IF_ERROR(ParseHfRopeScaling(path, f, c.rope_scaling));
  ASSIGN_OR_RETURN(c.tied_embeddings, f.Bool("tie_word_embeddings", false));
  if (c.arch != Architecture::kQwen2) {
    ASSIGN_OR_RETURN(c.qkv_bias, f.Bool("attention_bias", false));
    ASSIGN_OR_RETURN(bool mlp_bias, f.Bool("mlp_bias", false));
    if (mlp_bias) return f.Error("mlp_bias", "is true (MLP biases are unsupported)");
  }
  ASSIGN_OR_RETURN(c.bos_token_id, f.Int("bos_token_id", -1));
  RETURN_IF_ERROR(ParseHfEos(f, c.eos_token_ids));
  RETURN_IF_ERROR(ParseHfSelfDraft(path, f, c));

  // A sliding window narrower than the context would change attention; capping the
  // context at the window keeps full attention exact.
  if (c.arch == Architecture::kMistral || c.arch == Architecture::kQwen2) {
    ASSIGN_OR_RETURN(bool use_window, f.Bool("use_sliding_window", true));
    if (use_window && f.HasNonNull("sliding_window")) {
      ASSIGN_OR_RETURN(int window, f.Int("sliding_window"));
      if (window > 0 && window < c.max_position) c.max_position = window;
    }
  }

  if (absl::Status s = c.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", s.message()));
  }
  return c;
}

}  // namespace crossreg
