#include "engine/model/lora_adapter.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <string_view>
#include <system_error>
#include <utility>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/io/safetensors_file.h"
#include "engine/sampler.h"
#include "engine/status_macros.h"

namespace crossreg {
namespace {

using json = nlohmann::json;

constexpr LoraTarget kAllTargets[kNumLoraTargets] = {
    LoraTarget::kQ,    LoraTarget::kK,  LoraTarget::kV,   LoraTarget::kO,
    LoraTarget::kGate, LoraTarget::kUp, LoraTarget::kDown};

bool IsAttention(LoraTarget t) { return static_cast<int>(t) <= static_cast<int>(LoraTarget::kO); }
const char* BlockName(LoraTarget t) { return IsAttention(t) ? "self_attn" : "mlp"; }

std::optional<LoraTarget> TargetFromName(std::string_view name) {
  for (LoraTarget t : kAllTargets) {
    if (name == LoraTargetName(t)) return t;
  }
  return std::nullopt;
}


// The PEFT module path of one adapted linear layer, as it appears in tensor names.
std::string ModulePath(int layer, LoraTarget t) {
  return absl::StrCat("base_model.model.model.layers.", layer, ".", BlockName(t), ".",
                      LoraTargetName(t));
}

// rank_pattern / alpha_pattern key rule: a key matches a module when the module's full
// path ("base_model.model.model.layers.3.self_attn.q_proj") equals it or ends with
// "." + key, so "q_proj", "3.self_attn.q_proj" and "model.layers.3.self_attn.q_proj"
// all match layer 3's q_proj, but "3.self_attn.q_proj" does not match layer 13. Keys are
// plain text, not regular expressions. When several keys match, the longest (most
// specific) wins.
bool PatternKeyMatches(std::string_view path, std::string_view key) {
  if (key.empty() || key.size() > path.size()) return false;
  if (path.substr(path.size() - key.size()) != key) return false;
  return key.size() == path.size() || path[path.size() - key.size() - 1] == '.';
}

template <typename V>
std::optional<V> LookupPattern(const std::vector<std::pair<std::string, V>>& pattern,
                               std::string_view path) {
  const std::pair<std::string, V>* best = nullptr;
  for (const auto& entry : pattern) {
    if (PatternKeyMatches(path, entry.first) &&
        (best == nullptr || entry.first.size() > best->first.size())) {
      best = &entry;
    }
  }
  if (best == nullptr) return std::nullopt;
  return best->second;
}

// adapter_config.json, reduced to what the engine needs.
struct LoraConfig {
  std::string path;  // adapter_config.json, for messages
  int r = 0;
  double alpha = 0.0;
  bool use_rslora = false;
  std::array<bool, kNumLoraTargets> targets{};
  std::vector<std::pair<std::string, int>> rank_pattern;
  std::vector<std::pair<std::string, double>> alpha_pattern;
  std::vector<bool> layer_adapted;  // one per base layer

  bool Adapts(int layer, LoraTarget t) const {
    return layer_adapted[layer] && targets[static_cast<size_t>(t)];
  }
  int RankOf(int layer, LoraTarget t) const {
    return LookupPattern(rank_pattern, ModulePath(layer, t)).value_or(r);
  }
  // In double: the caller checks the range before narrowing to float.
  double ScaleOf(int layer, LoraTarget t) const {
    const std::string path = ModulePath(layer, t);
    const double alpha_here = LookupPattern(alpha_pattern, path).value_or(alpha);
    const double rank = RankOf(layer, t);
    return use_rslora ? alpha_here / std::sqrt(rank) : alpha_here / rank;
  }
};

bool PathExists(const std::string& path) {
  std::error_code ec;
  return std::filesystem::exists(path, ec);
}

// Through MappedFile, which refuses what is not a regular file (a FIFO would block a
// plain read forever).
absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> file, MappedFile::Open(path));
  return std::string(reinterpret_cast<const char*>(file->data()), file->size());
}

absl::StatusOr<json> ParseJsonObject(const std::string& path, std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(path, ": not valid JSON"));
  if (!j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": top level is not a JSON object"));
  }
  return j;
}

// Looks up `key`, treating an explicit null like a missing key (PEFT writes nulls).
const json* FindKey(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

absl::Status Bad(const std::string& path, const std::string& problem) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", problem));
}

// A JSON value quoted in an error message: scalars as written (long strings cut short),
// containers by type only (dumping a deeply nested one would recurse without bound).
std::string Describe(const json& v) {
  if (v.is_array() || v.is_object()) return absl::StrCat("an ", v.type_name());
  std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 64) text = absl::StrCat(text.substr(0, 64), "...");
  return text;
}

// A positive, finite number (lora_alpha and alpha_pattern values).
bool PositiveFinite(const json& v) {
  return v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() > 0;
}

std::optional<int64_t> AsInt(const json& j) {
  if (j.is_number_unsigned()) {
    const uint64_t v = j.get<uint64_t>();
    if (v > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<int64_t>(v);
  }
  if (j.is_number_integer()) return j.get<int64_t>();
  return std::nullopt;
}

absl::Status ParseTargetModules(const std::string& path, const json& j, LoraConfig& config) {
  const std::string known = "q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj";
  if (j.is_string()) {
    if (j.get<std::string>() != "all-linear") {
      return Bad(path, absl::StrCat("target_modules \"", j.get<std::string>(),
                                    "\" is not supported (use a list of ", known,
                                    ", or \"all-linear\")"));
    }
    config.targets.fill(true);
    return absl::OkStatus();
  }
  if (!j.is_array()) return Bad(path, "target_modules must be a list of module names or \"all-linear\"");
  for (const json& e : j) {
    if (!e.is_string()) return Bad(path, "target_modules entries must be strings");
    const std::optional<LoraTarget> t = TargetFromName(e.get<std::string>());
    if (!t) {
      return Bad(path, absl::StrCat("unknown target module \"", e.get<std::string>(),
                                    "\" (supported: ", known, ")"));
    }
    config.targets[static_cast<size_t>(*t)] = true;
  }
  for (bool on : config.targets) {
    if (on) return absl::OkStatus();
  }
  return Bad(path, "target_modules is empty");
}

absl::Status ParseLayersToTransform(const std::string& path, const json& j, int num_layers,
                                    LoraConfig& config) {
  // Pointers, not copies: copying a JSON value recurses as deep as it nests.
  std::vector<const json*> entries;
  if (j.is_array()) {
    for (const json& e : j) entries.push_back(&e);
  } else {
    entries.push_back(&j);  // PEFT also accepts a single index
  }
  std::fill(config.layer_adapted.begin(), config.layer_adapted.end(), false);
  for (const json* e : entries) {
    const std::optional<int64_t> layer = AsInt(*e);
    if (!layer) return Bad(path, "layers_to_transform must be a layer index or a list of them");
    if (*layer < 0 || *layer >= num_layers) {
      return Bad(path, absl::StrCat("layers_to_transform index ", *layer,
                                    " is out of range (base model has ", num_layers, " layers)"));
    }
    config.layer_adapted[*layer] = true;
  }
  return absl::OkStatus();
}

absl::StatusOr<LoraConfig> ParseLoraConfig(const std::string& path, const json& j,
                                           const ModelConfig& base) {
  LoraConfig config;
  config.path = path;
  config.layer_adapted.assign(base.num_layers, true);
  if (const json* v = FindKey(j, "peft_type")) {
    if (!v->is_string() || v->get<std::string>() != "LORA") {
      return Bad(path, absl::StrCat("peft_type ", Describe(*v), " is not \"LORA\""));
    }
  }
  const json* r = FindKey(j, "r");
  if (r == nullptr) return Bad(path, "missing \"r\" (LoRA rank)");
  const std::optional<int64_t> rank = AsInt(*r);
  if (!rank || *rank <= 0 || *rank > (1 << 20)) {
    return Bad(path, absl::StrCat("\"r\" must be a positive integer, got ", Describe(*r)));
  }
  config.r = static_cast<int>(*rank);
  config.alpha = config.r;
  if (const json* v = FindKey(j, "lora_alpha")) {
    // alpha <= 0 would switch the adapter off or flip its sign: not a trained adapter.
    if (!PositiveFinite(*v)) {
      return Bad(path, absl::StrCat("lora_alpha must be a positive number, got ", Describe(*v)));
    }
    config.alpha = v->get<double>();
  }
  if (const json* v = FindKey(j, "use_rslora")) {
    if (!v->is_boolean()) return Bad(path, "use_rslora must be true or false");
    config.use_rslora = v->get<bool>();
  }
  // Options that change the math in ways this engine does not implement.
  if (const json* v = FindKey(j, "fan_in_fan_out")) {
    if (!v->is_boolean() || v->get<bool>()) {
      return Bad(path, "fan_in_fan_out must be false (transposed Conv1D weights are not supported)");
    }
  }
  if (const json* v = FindKey(j, "bias")) {
    if (!v->is_string() || v->get<std::string>() != "none") {
      return Bad(path, absl::StrCat("bias ", Describe(*v), " is not supported (only \"none\")"));
    }
  }
  if (const json* v = FindKey(j, "use_dora")) {
    if (!v->is_boolean() || v->get<bool>()) return Bad(path, "use_dora adapters are not supported");
  }
  const json* targets = FindKey(j, "target_modules");
  if (targets == nullptr) return Bad(path, "missing \"target_modules\"");
  RETURN_IF_ERROR(ParseTargetModules(path, *targets, config));
  if (const json* v = FindKey(j, "layers_to_transform")) {
    RETURN_IF_ERROR(ParseLayersToTransform(path, *v, base.num_layers, config));
  }
  if (const json* v = FindKey(j, "rank_pattern")) {
    if (!v->is_object()) return Bad(path, "rank_pattern must be an object");
    for (const auto& [key, value] : v->items()) {
      const std::optional<int64_t> rk = AsInt(value);
      if (!rk || *rk <= 0 || *rk > (1 << 20)) {
        return Bad(path, absl::StrCat("rank_pattern[\"", key, "\"] must be a positive integer, got ",
                                      Describe(value)));
      }
      config.rank_pattern.emplace_back(key, static_cast<int>(*rk));
    }
  }
  if (const json* v = FindKey(j, "alpha_pattern")) {
    if (!v->is_object()) return Bad(path, "alpha_pattern must be an object");
    for (const auto& [key, value] : v->items()) {
      if (!PositiveFinite(value)) {
        return Bad(path, absl::StrCat("alpha_pattern[\"", key, "\"] must be a positive number, got ",
                                      Describe(value)));
      }
      config.alpha_pattern.emplace_back(key, value.get<double>());
    }
  }
  return config;
}

// One parsed LoRA tensor name.
struct LoraTensorName {
  int layer = 0;
  LoraTarget target = LoraTarget::kQ;
  bool is_a = true;
};

bool ConsumePrefix(std::string_view& s, std::string_view prefix) {
  if (s.substr(0, prefix.size()) != prefix) return false;
  s.remove_prefix(prefix.size());
  return true;
}

// Accepts [base_model.model.]model.layers.{i}.{self_attn|mlp}.{target}.lora_{A|B}[.default].weight.
// Layer range is checked by the caller so that the error can say so.
std::optional<LoraTensorName> ParseLoraTensorName(std::string_view s) {
  LoraTensorName out;
  ConsumePrefix(s, "base_model.model.");
  if (!ConsumePrefix(s, "model.layers.")) return std::nullopt;
  size_t digits = 0;
  int64_t layer = 0;
  while (digits < s.size() && s[digits] >= '0' && s[digits] <= '9') {
    layer = layer * 10 + (s[digits] - '0');
    if (++digits > 9) return std::nullopt;
  }
  if (digits == 0) return std::nullopt;
  out.layer = static_cast<int>(layer);
  s.remove_prefix(digits);
  if (!ConsumePrefix(s, ".")) return std::nullopt;
  const bool attention = ConsumePrefix(s, "self_attn.");
  if (!attention && !ConsumePrefix(s, "mlp.")) return std::nullopt;
  const size_t dot = s.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  const std::optional<LoraTarget> target = TargetFromName(s.substr(0, dot));
  if (!target || IsAttention(*target) != attention) return std::nullopt;
  out.target = *target;
  s.remove_prefix(dot);
  if (ConsumePrefix(s, ".lora_A")) {
    out.is_a = true;
  } else if (ConsumePrefix(s, ".lora_B")) {
    out.is_a = false;
  } else {
    return std::nullopt;
  }
  if (s == ".weight" || s == ".default.weight") return out;
  return std::nullopt;
}

// Checks one A or B tensor against the base and the configured rank; fills the matrix.
absl::Status LoadLoraTensor(const std::string& path, const std::string& name,
                            const TensorRef& ref, const LoraTensorName& parsed, int rank,
                            const ModelConfig& base, LoraMatrix& m) {
  const int64_t in = LoraInFeatures(base, parsed.target);
  const int64_t out = LoraOutFeatures(base, parsed.target);
  const std::vector<int64_t> expected =
      parsed.is_a ? std::vector<int64_t>{rank, in} : std::vector<int64_t>{out, rank};
  if (ref.shape != expected) {
    return Bad(path, absl::StrCat("tensor '", name, "' has shape ", ShapeString(ref.shape),
                                  ", expected ", ShapeString(expected), " (",
                                  parsed.is_a ? "rank x in_features" : "out_features x rank",
                                  " of ", LoraTargetName(parsed.target), ", rank ", rank, ")"));
  }
  std::vector<float>& dst = parsed.is_a ? m.a : m.b;
  if (!dst.empty()) {
    return Bad(path, absl::StrCat("tensor '", name, "' duplicates another lora_",
                                  parsed.is_a ? "A" : "B", " for layer ", parsed.layer, " ",
                                  LoraTargetName(parsed.target)));
  }
  dst.resize(static_cast<size_t>(ref.numel()));
  ConvertToF32(ref.dtype, ref.data, dst.data(), dst.size());
  return absl::OkStatus();
}

absl::Status LoadWeights(const std::string& path, const SafetensorsFile& file,
                         const LoraConfig& config, const ModelConfig& base,
                         LoraAdapter& adapter) {
  for (const auto& [name, ref] : file.tensors()) {
    const std::optional<LoraTensorName> parsed = ParseLoraTensorName(name);
    if (!parsed) {
      if (name.find("lora") == std::string::npos) continue;  // not ours (e.g. metadata-only extras)
      return Bad(path, absl::StrCat("unrecognised LoRA tensor '", name,
                                    "' (expected [base_model.model.]model.layers.N.{self_attn|mlp}."
                                    "<module>.lora_{A|B}[.default].weight)"));
    }
    if (parsed->layer >= base.num_layers) {
      return Bad(path, absl::StrCat("tensor '", name, "' has layer index ", parsed->layer,
                                    ", out of range (base model has ", base.num_layers, " layers)"));
    }
    if (!config.targets[static_cast<size_t>(parsed->target)]) {
      return Bad(path, absl::StrCat("tensor '", name, "' adapts ", LoraTargetName(parsed->target),
                                    ", which is not in target_modules"));
    }
    if (!config.layer_adapted[parsed->layer]) {
      return Bad(path, absl::StrCat("tensor '", name, "' adapts layer ", parsed->layer,
                                    ", which is not in layers_to_transform"));
    }
    LoraMatrix& m = adapter.layers[parsed->layer].at(parsed->target);
    const int rank = config.RankOf(parsed->layer, parsed->target);
    RETURN_IF_ERROR(LoadLoraTensor(path, name, ref, *parsed, rank, base, m));
  }
  for (int layer = 0; layer < base.num_layers; ++layer) {
    for (LoraTarget t : kAllTargets) {
      if (!config.Adapts(layer, t)) continue;
      LoraMatrix& m = adapter.layers[layer].at(t);
      for (const bool is_a : {true, false}) {
        if ((is_a ? m.a : m.b).empty()) {
          return Bad(path, absl::StrCat("missing ", is_a ? "lora_A" : "lora_B", " for layer ", layer,
                                        " ", LoraTargetName(t), " (expected tensor '",
                                        ModulePath(layer, t), is_a ? ".lora_A" : ".lora_B",
                                        ".weight')"));
        }
      }
      m.rank = config.RankOf(layer, t);
      const double scale = config.ScaleOf(layer, t);
      if (!(scale <= std::numeric_limits<float>::max())) {
        return Bad(config.path, absl::StrCat("scale (lora_alpha / r) of layer ", layer, " ",
                                             LoraTargetName(t), " is ", scale,
                                             ", beyond float range"));
      }
      m.scale = static_cast<float>(scale);
      adapter.max_rank = std::max(adapter.max_rank, m.rank);
    }
  }
  return absl::OkStatus();
}

// Why a placeholder id may not be used, or "" when it may.
std::string PlaceholderProblem(int64_t id, const ModelConfig& base) {
  if (id == base.bos_token_id) {
    return absl::StrCat("is the BOS token (", id, "): the placeholder fills empty draft slots "
                        "and must be a token the adapter was trained with there, not BOS, "
                        "which marks the start of a sequence");
  }
  for (int eos : base.eos_token_ids) {
    if (id == eos) {
      return absl::StrCat("is an end-of-sequence token (", id, "): a placeholder that ends "
                          "generation when drafted cannot fill empty draft slots");
    }
  }
  return "";
}

// crossreg_adapter.json: {"placeholder_token_id": int, "window": int, "layout": "crossreg-v1",
// "draft_layout": "chain" | "blocks"}. placeholder_token_id is required; the rest are optional (older exports lack
// them) but checked when present; other keys are ignored with a warning.
absl::Status ReadCrossregExtras(const std::string& path, std::string_view text,
                                const ModelConfig& base, LoraAdapter& adapter) {
  ASSIGN_OR_RETURN(json j, ParseJsonObject(path, text));
  const json* placeholder = FindKey(j, "placeholder_token_id");
  if (placeholder == nullptr) {
    return Bad(path, "missing \"placeholder_token_id\" (the token that fills empty draft "
                     "slots, e.g. the trainer's <|draft|>)");
  }
  const std::optional<int64_t> id = AsInt(*placeholder);
  if (!id || *id < 0 || *id >= base.vocab_size) {
    return Bad(path, absl::StrCat("placeholder_token_id must be an integer in [0, ",
                                  base.vocab_size, "), got ", Describe(*placeholder)));
  }
  if (const std::string problem = PlaceholderProblem(*id, base); !problem.empty()) {
    return Bad(path, absl::StrCat("placeholder_token_id ", problem));
  }
  adapter.placeholder_token_id = static_cast<int32_t>(*id);

  if (const json* v = FindKey(j, "window")) {
    const std::optional<int64_t> window = AsInt(*v);
    if (!window || *window < 1 || *window > base.max_position) {
      return Bad(path, absl::StrCat("window (predictive rows per training example) must be an "
                                    "integer in [1, ", base.max_position,
                                    "] (the model's context length), got ", Describe(*v)));
    }
    adapter.window = static_cast<int>(*window);
  }
  if (const json* v = FindKey(j, "layout")) {
    if (!v->is_string() || v->get_ref<const std::string&>() != kCrossregLayoutV1) {
      return Bad(path, absl::StrCat("layout ", Describe(*v), " is not supported (known: \"",
                                    kCrossregLayoutV1, "\")"));
    }
  }
  if (const json* v = FindKey(j, "draft_layout")) {
    if (!v->is_string() || (v->get_ref<const std::string&>() != "chain" && v->get_ref<const std::string&>() != "blocks")) {
      return Bad(path, absl::StrCat("draft_layout must be \"chain\" or \"blocks\" (the layout the adapter was "
                                    "trained for), got ",
                                    Describe(*v)));
    }
    adapter.draft_layout = v->get<std::string>();
  }
  for (const auto& [key, value] : j.items()) {
    if (key != "placeholder_token_id" && key != "window" && key != "layout" && key != "draft_layout") {
      std::string shown = key.substr(0, 64);
      adapter.warnings.push_back(absl::StrCat(path, ": unknown key \"", shown, "\" ignored"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

int64_t LoraInFeatures(const ModelConfig& base, LoraTarget t) {
  if (t == LoraTarget::kO) return base.q_dim();
  if (t == LoraTarget::kDown) return base.intermediate_size;
  return base.hidden_size;
}

int64_t LoraOutFeatures(const ModelConfig& base, LoraTarget t) {
  switch (t) {
    case LoraTarget::kQ: return base.q_dim();
    case LoraTarget::kK:
    case LoraTarget::kV: return base.kv_dim();
    case LoraTarget::kGate:
    case LoraTarget::kUp: return base.intermediate_size;
    case LoraTarget::kO:
    case LoraTarget::kDown: return base.hidden_size;
  }
  return 0;
}

const char* LoraTargetName(LoraTarget t) {
  switch (t) {
    case LoraTarget::kQ: return "q_proj";
    case LoraTarget::kK: return "k_proj";
    case LoraTarget::kV: return "v_proj";
    case LoraTarget::kO: return "o_proj";
    case LoraTarget::kGate: return "gate_proj";
    case LoraTarget::kUp: return "up_proj";
    case LoraTarget::kDown: return "down_proj";
  }
  return "?";
}

absl::StatusOr<std::unique_ptr<LoraAdapter>> LoadLoraAdapter(const std::string& dir,
                                                             const ModelConfig& base) {
  const std::string config_path = dir + "/adapter_config.json";
  const std::string weights_path = dir + "/adapter_model.safetensors";
  const std::string extras_path = dir + "/crossreg_adapter.json";
  if (!PathExists(config_path)) {
    return absl::NotFoundError(absl::StrCat("LoRA adapter config not found: ", config_path));
  }
  if (!PathExists(weights_path)) {
    const std::string pickle_path = dir + "/adapter_model.bin";
    if (PathExists(pickle_path)) {
      return absl::InvalidArgumentError(absl::StrCat(
          pickle_path, ": pickled PyTorch adapters are not supported; only "
                       "adapter_model.safetensors is (convert with safetensors.torch.save_file)"));
    }
    return absl::NotFoundError(absl::StrCat("LoRA adapter weights not found: ", weights_path));
  }
  LoraAdapterFiles files;
  files.dir = dir;
  ASSIGN_OR_RETURN(files.adapter_config_json, ReadTextFile(config_path));
  ASSIGN_OR_RETURN(files.adapter_model, MappedFile::Open(weights_path));
  if (PathExists(extras_path)) {
    ASSIGN_OR_RETURN(files.crossreg_adapter_json, ReadTextFile(extras_path));
  }
  return LoadLoraAdapterFromFiles(files, base);
}

absl::StatusOr<std::unique_ptr<LoraAdapter>> LoadLoraAdapterFromFiles(const LoraAdapterFiles& files,
                                                                      const ModelConfig& base) {
  RETURN_IF_ERROR(base.Validate());
  const std::string config_path = files.dir + "/adapter_config.json";
  const std::string extras_path = files.dir + "/crossreg_adapter.json";
  if (files.adapter_model == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(files.dir, ": no adapter_model.safetensors"));
  }
  ASSIGN_OR_RETURN(json config_json, ParseJsonObject(config_path, files.adapter_config_json));
  ASSIGN_OR_RETURN(LoraConfig config, ParseLoraConfig(config_path, config_json, base));
  ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file,
                   SafetensorsFile::Parse(files.adapter_model));

  auto adapter = std::make_unique<LoraAdapter>();
  adapter->source = files.dir;
  adapter->layers.resize(base.num_layers);
  RETURN_IF_ERROR(LoadWeights(files.adapter_model->path(), *file, config, base, *adapter));
  if (files.crossreg_adapter_json.has_value()) {
    RETURN_IF_ERROR(ReadCrossregExtras(extras_path, *files.crossreg_adapter_json, base, *adapter));
  } else {
    adapter->metadata_missing = true;
    std::string warning = absl::StrCat(
        extras_path, " not found: this may be a plain PEFT LoRA, not trained for "
        "Cross-Regression (lossless output stays exact, but drafts may rarely be accepted); "
        "using placeholder_token_id ", adapter->placeholder_token_id);
    if (const std::string problem = PlaceholderProblem(adapter->placeholder_token_id, base);
        !problem.empty()) {
      absl::StrAppend(&warning, ", which ", problem);
    }
    adapter->warnings.push_back(std::move(warning));
  }
  return adapter;
}

std::unique_ptr<LoraAdapter> MakeRandomLoraAdapter(const ModelConfig& base,
                                                   const RandomLoraOptions& options) {
  auto adapter = std::make_unique<LoraAdapter>();
  adapter->source = absl::StrCat("random(seed=", options.seed, ")");
  adapter->placeholder_token_id = options.placeholder_token_id;
  adapter->window = options.window;
  adapter->layers.resize(std::max(base.num_layers, 0));
  if (options.rank <= 0) return adapter;  // nothing adapted
  Rng rng(options.seed);
  const auto uniform = [&rng](float bound) {
    return static_cast<float>((2.0 * rng.Uniform() - 1.0) * bound);
  };
  const int rank = options.rank;
  for (LoraLayer& layer : adapter->layers) {
    for (LoraTarget t : kAllTargets) {
      const int64_t in = LoraInFeatures(base, t);
      const int64_t out = LoraOutFeatures(base, t);
      LoraMatrix& m = layer.at(t);
      m.rank = rank;
      m.scale = options.alpha / static_cast<float>(rank);
      m.a.resize(static_cast<size_t>(rank * in));
      m.b.resize(static_cast<size_t>(out * rank));
      const float a_bound = options.magnitude / std::sqrt(static_cast<float>(in));
      for (float& x : m.a) x = uniform(a_bound);
      // B is drawn even when zeroed so that zero_b keeps the same A as without it.
      const float b_bound = options.magnitude / std::sqrt(static_cast<float>(rank));
      for (float& x : m.b) {
        const float v = uniform(b_bound);
        x = options.zero_b ? 0.0f : v;
      }
    }
  }
  adapter->max_rank = rank;
  return adapter;
}

}  // namespace crossreg
