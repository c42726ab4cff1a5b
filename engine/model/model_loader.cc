#include "engine/model/model_loader.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <filesystem>
#include <functional>
#include <system_error>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/io/gguf_file.h"
#include "engine/io/mapped_file.h"
#include "engine/io/safetensors_file.h"
#include "engine/model/model_config_parse.h"
#include "engine/status_macros.h"

namespace crossreg {
namespace {

using json = nlohmann::json;
using TensorLookup = std::function<const TensorRef*(const std::string& name)>;

// Resolves tensors by name, checks their shapes against what the config implies, and
// converts or permutes into buffers it keeps in `storage` when a view will not do.
class WeightBinder {
 public:
  WeightBinder(std::string source, TensorLookup lookup,
               std::vector<std::shared_ptr<const void>>& storage)
      : source_(std::move(source)), lookup_(std::move(lookup)), storage_(storage) {}

  bool Has(const std::string& name) const { return lookup_(name) != nullptr; }

  // A view into the file, in its stored dtype.
  absl::StatusOr<TensorRef> View(const std::string& name, const std::vector<int64_t>& shape) {
    const TensorRef* t = lookup_(name);
    if (t == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(source_, ": tensor '", name, "' is missing"));
    }
    if (t->shape != shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          source_, ": tensor '", name, "' has shape ", ShapeString(t->shape), ", expected ",
          ShapeString(shape)));
    }
    return *t;
  }

  // An owned float32 copy (norms, biases, RoPE factors).
  absl::StatusOr<TensorRef> F32(const std::string& name, const std::vector<int64_t>& shape) {
    ASSIGN_OR_RETURN(TensorRef t, View(name, shape));
    auto buffer = std::make_shared<std::vector<float>>(static_cast<size_t>(t.numel()));
    ConvertToF32(t.dtype, t.data, buffer->data(), buffer->size());
    storage_.push_back(buffer);
    return TensorRef{DType::kF32, t.shape, buffer->data()};
  }

  // Rows reordered from Meta's interleaved RoPE layout to Hugging Face's half-split:
  // within each head, new row h*(head_dim/2)+i = old row 2*i+h. Works for 1-D biases
  // (one element per row) as for 2-D weights.
  absl::StatusOr<TensorRef> MetaToHfRows(const TensorRef& t, int head_dim) {
    const int64_t rows = t.rows();
    if (t.shape.size() == 1 && IsQuantized(t.dtype)) {
      // A quantized block spans many rows of a 1-D tensor: permute its values instead.
      auto values = std::make_shared<std::vector<float>>(static_cast<size_t>(t.numel()));
      ConvertToF32(t.dtype, t.data, values->data(), values->size());
      storage_.push_back(values);
      return MetaToHfRows(TensorRef{DType::kF32, t.shape, values->data()}, head_dim);
    }
    const size_t row_bytes = t.shape.size() == 1 ? DTypeSize(t.dtype) : t.row_bytes();
    auto buffer = std::make_shared<std::vector<unsigned char>>(static_cast<size_t>(rows) * row_bytes);
    const auto* src = static_cast<const unsigned char*>(t.data);
    const int64_t half = head_dim / 2;
    for (int64_t head = 0; head < rows / head_dim; ++head) {
      const int64_t base = head * head_dim;
      for (int64_t h = 0; h < 2; ++h) {
        for (int64_t i = 0; i < half; ++i) {
          std::memcpy(buffer->data() + (base + h * half + i) * row_bytes,
                      src + (base + 2 * i + h) * row_bytes, row_bytes);
        }
      }
    }
    storage_.push_back(buffer);
    return TensorRef{t.dtype, t.shape, buffer->data()};
  }

 private:
  std::string source_;
  TensorLookup lookup_;
  std::vector<std::shared_ptr<const void>>& storage_;
};

// Tensor names of one format.
struct TensorNames {
  std::string embedding, final_norm, output;
  std::function<std::string(int layer, const char* part)> layer;
  // parts: attn_norm q k v o q_bias k_bias v_bias ffn_norm gate up down
};

TensorNames GgufNames() {
  return {"token_embd.weight", "output_norm.weight", "output.weight",
          [](int l, const char* part) -> std::string {
            const std::string p = absl::StrCat("blk.", l, ".");
            const std::string s = part;
            if (s == "attn_norm") return p + "attn_norm.weight";
            if (s == "q") return p + "attn_q.weight";
            if (s == "k") return p + "attn_k.weight";
            if (s == "v") return p + "attn_v.weight";
            if (s == "o") return p + "attn_output.weight";
            if (s == "q_bias") return p + "attn_q.bias";
            if (s == "k_bias") return p + "attn_k.bias";
            if (s == "v_bias") return p + "attn_v.bias";
            if (s == "ffn_norm") return p + "ffn_norm.weight";
            if (s == "gate") return p + "ffn_gate.weight";
            if (s == "up") return p + "ffn_up.weight";
            return p + "ffn_down.weight";
          }};
}

TensorNames HfNames() {
  return {"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight",
          [](int l, const char* part) -> std::string {
            const std::string p = absl::StrCat("model.layers.", l, ".");
            const std::string s = part;
            if (s == "attn_norm") return p + "input_layernorm.weight";
            if (s == "q") return p + "self_attn.q_proj.weight";
            if (s == "k") return p + "self_attn.k_proj.weight";
            if (s == "v") return p + "self_attn.v_proj.weight";
            if (s == "o") return p + "self_attn.o_proj.weight";
            if (s == "q_bias") return p + "self_attn.q_proj.bias";
            if (s == "k_bias") return p + "self_attn.k_proj.bias";
            if (s == "v_bias") return p + "self_attn.v_proj.bias";
            if (s == "ffn_norm") return p + "post_attention_layernorm.weight";
            if (s == "gate") return p + "mlp.gate_proj.weight";
            if (s == "up") return p + "mlp.up_proj.weight";
            return p + "mlp.down_proj.weight";
          }};
}

// Binds embedding, final norm and output layer. An output layer stored as an exact
// copy of the embedding (llama2.c exports do this) is treated as tied.
absl::Status BindGlobals(ModelConfig& c, const TensorNames& names, WeightBinder& bind,
                         ModelWeights& w) {
  const int64_t hidden = c.hidden_size;
  const int64_t vocab = c.vocab_size;
  ASSIGN_OR_RETURN(w.tok_embeddings, bind.View(names.embedding, {vocab, hidden}));
  ASSIGN_OR_RETURN(w.final_norm, bind.F32(names.final_norm, {hidden}));
  if (c.tied_embeddings) {
    w.output = w.tok_embeddings;
  } else {
    ASSIGN_OR_RETURN(w.output, bind.View(names.output, {vocab, hidden}));
    const TensorRef& e = w.tok_embeddings;
    if (w.output.dtype == e.dtype && std::memcmp(w.output.data, e.data, e.nbytes()) == 0) {
      c.tied_embeddings = true;
      w.output = e;
    }
  }
  return absl::OkStatus();
}

// Binds the per-layer tensors. `meta_rope_order`: q/k rows (and biases) are stored
// interleaved and get permuted to HF order.
absl::Status BindLayers(const ModelConfig& c, const TensorNames& names, WeightBinder& bind,
                        bool meta_rope_order, ModelWeights& w) {
  const int64_t hidden = c.hidden_size, inter = c.intermediate_size;
  const int64_t q_dim = c.q_dim(), kv_dim = c.kv_dim();
  w.layers.resize(c.num_layers);
  for (int l = 0; l < c.num_layers; ++l) {
    LayerWeights& lw = w.layers[l];
    auto name = [&](const char* part) { return names.layer(l, part); };
    ASSIGN_OR_RETURN(lw.attn_norm, bind.F32(name("attn_norm"), {hidden}));
    ASSIGN_OR_RETURN(lw.wq, bind.View(name("q"), {q_dim, hidden}));
    ASSIGN_OR_RETURN(lw.wk, bind.View(name("k"), {kv_dim, hidden}));
    ASSIGN_OR_RETURN(lw.wv, bind.View(name("v"), {kv_dim, hidden}));
    ASSIGN_OR_RETURN(lw.wo, bind.View(name("o"), {hidden, q_dim}));
    if (c.qkv_bias) {
      ASSIGN_OR_RETURN(lw.bq, bind.F32(name("q_bias"), {q_dim}));
      ASSIGN_OR_RETURN(lw.bk, bind.F32(name("k_bias"), {kv_dim}));
      ASSIGN_OR_RETURN(lw.bv, bind.F32(name("v_bias"), {kv_dim}));
    }
    if (meta_rope_order) {
      ASSIGN_OR_RETURN(lw.wq, bind.MetaToHfRows(lw.wq, c.head_dim));
      ASSIGN_OR_RETURN(lw.wk, bind.MetaToHfRows(lw.wk, c.head_dim));
      if (c.qkv_bias) {
        ASSIGN_OR_RETURN(lw.bq, bind.MetaToHfRows(lw.bq, c.head_dim));
        ASSIGN_OR_RETURN(lw.bk, bind.MetaToHfRows(lw.bk, c.head_dim));
      }
    }
    ASSIGN_OR_RETURN(lw.ffn_norm, bind.F32(name("ffn_norm"), {hidden}));
    ASSIGN_OR_RETURN(lw.w_gate, bind.View(name("gate"), {inter, hidden}));
    ASSIGN_OR_RETURN(lw.w_up, bind.View(name("up"), {inter, hidden}));
    ASSIGN_OR_RETURN(lw.w_down, bind.View(name("down"), {hidden, inter}));
  }
  return absl::OkStatus();
}

// Creates the tokenizer and fills in special ids the config lacks. `tokenizer_source`
// names where the vocabulary came from (tokenizer.json, or the GGUF keys).
absl::Status AttachTokenizer(const std::string& source, const std::string& tokenizer_source,
                             absl::StatusOr<TokenizerSpec> spec, Model& model) {
  if (!spec.ok()) {
    return absl::Status(spec.status().code(),
                        absl::StrCat(source, ": tokenizer: ", spec.status().message()));
  }
  if (absl::Status s = ValidateTokenizerForModel(*spec, model.config.vocab_size); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", tokenizer_source, ": ", s.message()));
  }
  if (model.config.bos_token_id < 0 && spec->bos_id >= 0) model.config.bos_token_id = spec->bos_id;
  if (model.config.eos_token_ids.empty() && spec->eos_id >= 0) {
    model.config.eos_token_ids.push_back(spec->eos_id);
  }
  auto tokenizer = Tokenizer::Create(*std::move(spec));
  if (!tokenizer.ok()) {
    return absl::Status(tokenizer.status().code(),
                        absl::StrCat(source, ": tokenizer: ", tokenizer.status().message()));
  }
  model.tokenizer = *std::move(tokenizer);
  return absl::OkStatus();
}

absl::Status WithSource(const std::string& source, const absl::Status& s) {
  if (s.ok() || absl::StrContains(s.message(), source)) return s;
  return absl::Status(s.code(), absl::StrCat(source, ": ", s.message()));
}

absl::StatusOr<std::unique_ptr<Model>> LoadGguf(const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(path));
  auto model = std::make_unique<Model>();
  model->source = path;
  auto config = ModelConfigFromGguf(file->metadata());
  if (!config.ok()) return WithSource(path, config.status());
  model->config = *std::move(config);
  ModelConfig& c = model->config;

  const GgufFile* f = file.get();
  WeightBinder bind(
      path,
      [f](const std::string& n) -> const TensorRef* {
        const GgufTensorInfo* t = f->FindTensor(n);
        return t == nullptr ? nullptr : &t->ref;
      },
      model->weights.storage);
  model->weights.storage.push_back(file->mapping());
  c.tied_embeddings = !bind.Has("output.weight");
  if (bind.Has("rope_freqs.weight")) {
    ASSIGN_OR_RETURN(TensorRef factors, bind.F32("rope_freqs.weight", {c.head_dim / 2}));
    const float* p = static_cast<const float*>(factors.data);
    c.rope_freq_factors.assign(p, p + factors.numel());
    RETURN_IF_ERROR(WithSource(path, c.Validate()));
  }
  // llama-arch GGUF stores q/k in Meta's interleaved order; qwen2 is already NeoX.
  const bool meta_order = c.arch == Architecture::kLlama;
  RETURN_IF_ERROR(BindGlobals(c, GgufNames(), bind, model->weights));
  RETURN_IF_ERROR(BindLayers(c, GgufNames(), bind, meta_order, model->weights));
  RETURN_IF_ERROR(AttachTokenizer(path, "tokenizer (tokenizer.ggml.*)",
                                  TokenizerSpecFromGguf(file->metadata()), *model));
  if (auto chat = file->metadata().GetString("tokenizer.chat_template"); chat.ok()) model->chat_template = *chat;
  RETURN_IF_ERROR(WithSource(path, c.Validate()));
  return model;
}

// generation_config.json: sampling defaults and extra end-of-sequence ids.
absl::Status ReadGenerationConfig(const std::string& path, Model& model) {
  ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> file, MappedFile::Open(path));
  const char* text = reinterpret_cast<const char*>(file->data());
  const json j = json::parse(text, text + file->size(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a valid JSON object"));
  }
  auto number = [&](const char* key, float& out) -> absl::Status {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) return absl::OkStatus();
    // A double past float's range would make the conversion undefined.
    if (!it->is_number() || !std::isfinite(it->get<double>()) ||
        std::fabs(it->get<double>()) > std::numeric_limits<float>::max()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": key '", key, "' must be a number"));
    }
    out = static_cast<float>(it->get<double>());
    return absl::OkStatus();
  };
  GenerationDefaults& g = model.generation_defaults;
  RETURN_IF_ERROR(number("temperature", g.temperature));
  RETURN_IF_ERROR(number("top_p", g.top_p));
  if (auto it = j.find("top_k"); it != j.end() && !it->is_null()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > INT32_MAX) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": key 'top_k' must be a non-negative integer"));
    }
    g.top_k = it->get<int>();
  }
  if (auto it = j.find("eos_token_id"); it != j.end() && !it->is_null()) {
    // Pointers, not copies: copying a JSON value recurses as deep as it nests.
    std::vector<const json*> ids;
    if (it->is_array()) {
      for (const json& id : *it) ids.push_back(&id);
    } else {
      ids.push_back(&*it);
    }
    for (const json* id_ptr : ids) {
      const json& id = *id_ptr;
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": key 'eos_token_id' must be a non-negative integer or a list of them"));
      }
      const int v = id.get<int>();
      auto& eos = model.config.eos_token_ids;
      if (std::find(eos.begin(), eos.end(), v) == eos.end()) eos.push_back(v);
    }
  }
  return absl::OkStatus();
}

// tokenizer_config.json: only "chat_template", a string or a list of {name, template}
// (the one named "default" is the chat template).
absl::Status ReadChatTemplate(const std::string& path, Model& model) {
  ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> file, MappedFile::Open(path));
  const char* text = reinterpret_cast<const char*>(file->data());
  const json j = json::parse(text, text + file->size(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a valid JSON object"));
  }
  auto it = j.find("chat_template");
  if (it == j.end() || it->is_null()) return absl::OkStatus();
  if (it->is_string()) {
    model.chat_template = it->get<std::string>();
    return absl::OkStatus();
  }
  if (it->is_array()) {
    for (const json& entry : *it) {
      // Only well-typed entries count (json::value() would throw on a non-string name).
      const auto name = entry.is_object() ? entry.find("name") : entry.end();
      const auto text = entry.is_object() ? entry.find("template") : entry.end();
      if (entry.is_object() && name != entry.end() && name->is_string() && name->get<std::string>() == "default" &&
          text != entry.end() && text->is_string()) {
        model.chat_template = text->get<std::string>();
      }
    }
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": key 'chat_template' must be a string or a list of {name, template}"));
}

bool IsRegularFile(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_regular_file(path, ec);
}

absl::StatusOr<std::unique_ptr<Model>> LoadHfDirectory(const std::string& dir) {
  auto model = std::make_unique<Model>();
  model->source = dir;
  ASSIGN_OR_RETURN(model->config, ModelConfigFromHfJson(dir + "/config.json"));
  ModelConfig& c = model->config;
  ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsCheckpoint> ckpt, SafetensorsCheckpoint::OpenDirectory(dir));
  const SafetensorsCheckpoint* ck = ckpt.get();
  WeightBinder bind(dir, [ck](const std::string& n) { return ck->Find(n); }, model->weights.storage);
  for (auto& s : ckpt->Storage()) model->weights.storage.push_back(std::move(s));
  if (!bind.Has("lm_head.weight")) c.tied_embeddings = true;
  RETURN_IF_ERROR(BindGlobals(c, HfNames(), bind, model->weights));
  RETURN_IF_ERROR(BindLayers(c, HfNames(), bind, /*meta_rope_order=*/false, model->weights));
  const std::string tokenizer_path = dir + "/tokenizer.json";
  RETURN_IF_ERROR(AttachTokenizer(dir, tokenizer_path,
                                  TokenizerSpecFromHfJson(tokenizer_path, c.vocab_size), *model));
  const std::string gen_path = dir + "/generation_config.json";
  if (IsRegularFile(gen_path)) RETURN_IF_ERROR(ReadGenerationConfig(gen_path, *model));
  const std::string tokenizer_config_path = dir + "/tokenizer_config.json";
  if (IsRegularFile(tokenizer_config_path)) RETURN_IF_ERROR(ReadChatTemplate(tokenizer_config_path, *model));
  RETURN_IF_ERROR(WithSource(dir, c.Validate()));
  return model;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> LoadModel(const std::string& path) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) {
    return absl::NotFoundError(absl::StrCat("model path does not exist: ", path));
  }
  if (std::filesystem::is_directory(status)) return LoadHfDirectory(path);
  return LoadGguf(path);
}

}  // namespace crossreg
