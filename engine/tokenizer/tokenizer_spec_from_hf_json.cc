// TokenizerSpecFromHfJson: Hugging Face tokenizer.json with model.type "BPE", either
// byte-level (GPT-2, Llama 3, Qwen2) or converted from SentencePiece (Llama 2 style).
//
// Special ids: BOS is the first SpecialToken of post_processor's TemplateProcessing
// "single" template (then add_bos = true); without one, add_bos = false and BOS is the
// first known name present ("<s>", "<|begin_of_text|>", "<|startoftext|>", "<bos>",
// "<|endoftext|>"). EOS is the first present of "</s>", "<|end_of_text|>",
// "<|endoftext|>", "<eos>", "<|im_end|>". UNK is model.unk_token. tokenizer_config.json
// is not read.
#include <algorithm>
#include <limits>
#include <map>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "engine/io/mapped_file.h"
#include "engine/status_macros.h"
#include "engine/tokenizer/pretokenizer_regex.h"
#include "engine/tokenizer/spm_bpe_tokenizer.h"
#include "engine/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"

namespace crossreg {
namespace {

using json = nlohmann::json;
using TokenType = TokenizerSpec::TokenType;
constexpr std::string_view kSpaceMarker = "\xE2\x96\x81";  // "▁"
// Tokens no merge produces sort below every merge result.
constexpr float kUnmergedScore = -1e9f;

// A piece quoted in an error message: escaped, and cut short if long.
std::string Quoted(std::string_view piece) {
  constexpr size_t kMaxShown = 48;
  const std::string_view head = piece.substr(0, kMaxShown);
  std::string shown = absl::CHexEscape(absl::string_view(head.data(), head.size()));
  if (piece.size() > kMaxShown) absl::StrAppend(&shown, "...");
  return absl::StrCat("'", shown, "'");
}

class HfJsonReader {
 public:
  HfJsonReader(std::string path, int64_t model_vocab_size)
      : path_(std::move(path)), model_vocab_size_(model_vocab_size) {}
  absl::StatusOr<TokenizerSpec> Read(std::string_view text);

 private:
  absl::Status Error(std::string_view field, std::string_view problem) const {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": field '", std::string(field), "' ", std::string(problem)));
  }
  absl::Status ReadVocab(const json& vocab, TokenizerSpec* spec);
  absl::Status ReadAddedTokens(const json& root, TokenizerSpec* spec);
  // Checked before the id sizes any table: an id may not exceed the entry count.
  absl::Status CheckId(std::string_view field, std::string_view piece, int64_t id) const;
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ReadMerges(
      const json& model) const;
  absl::StatusOr<TokenizerSpec::PreTokenizer> ByteLevelRegexKind(const json& pre) const;
  void ChooseSpecialIds(const json& root, const json& model, TokenizerSpec* spec) const;
  int32_t IdOf(const std::string& piece) const {
    auto it = ids_.find(piece);
    return it == ids_.end() ? -1 : it->second;
  }

  std::string path_;
  int64_t model_vocab_size_ = 0;  // > 0: the model's embedding rows
  int64_t id_limit_ = 0;          // every id lies in [0, id_limit_)
  std::string id_limit_reason_;
  std::map<std::string, int32_t> ids_;  // vocab and added tokens
  size_t max_piece_size_ = 0;          // longest key of ids_
};

// Types of the pre-tokenizer steps ("ByteLevel", "Split", ...), flattening Sequence.
std::vector<const json*> Steps(const json& node, const char* list_key) {
  std::vector<const json*> steps;
  if (!node.is_object()) return steps;
  auto type = node.find("type");
  if (type != node.end() && type->is_string() && *type == "Sequence") {
    auto list = node.find(list_key);
    if (list != node.end() && list->is_array()) {
      for (const json& step : *list) {
        if (step.is_object()) steps.push_back(&step);
      }
    }
  } else {
    steps.push_back(&node);
  }
  return steps;
}

std::string TypeOf(const json& node) {
  auto type = node.find("type");
  return type != node.end() && type->is_string() ? type->get<std::string>() : "";
}

bool BoolField(const json& node, const char* key, bool default_value) {
  auto it = node.find(key);
  return it != node.end() && it->is_boolean() ? it->get<bool>() : default_value;
}

std::string StringField(const json& node, const char* key) {
  auto it = node.find(key);
  return it != node.end() && it->is_string() ? it->get<std::string>() : "";
}

absl::StatusOr<TokenizerSpec> HfJsonReader::Read(std::string_view text) {
  const json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(path_, ": not valid JSON"));
  if (!root.is_object()) return Error("(root)", "is not a JSON object");
  auto model_it = root.find("model");
  if (model_it == root.end() || !model_it->is_object()) return Error("model", "is missing");
  const json& model = *model_it;
  const std::string model_type = TypeOf(model);
  // Old files omit model.type for BPE; they still carry vocab + merges.
  if (!(model_type == "BPE" || (model_type.empty() && model.contains("merges")))) {
    return Error("model.type", absl::StrCat("is '", model_type,
                                            "'; only BPE tokenizers are supported"));
  }

  // Ids are bounded by the number of entries (a vocabulary is dense, up to the odd
  // gap) and by the model's embedding rows, before any table is sized from them.
  auto vocab = model.find("vocab");
  if (vocab == model.end() || !vocab->is_object()) return Error("model.vocab", "is missing");
  auto added = root.find("added_tokens");
  const size_t added_count = added != root.end() && added->is_array() ? added->size() : 0;
  id_limit_ = static_cast<int64_t>(vocab->size() + added_count);
  id_limit_reason_ = absl::StrCat("the ", vocab->size(), " entries of model.vocab and ",
                                  added_count, " of added_tokens");
  if (model_vocab_size_ > 0 && model_vocab_size_ < id_limit_) {
    id_limit_ = model_vocab_size_;
    id_limit_reason_ = "the model's vocab_size";
  }
  id_limit_ = std::min<int64_t>(id_limit_, std::numeric_limits<int32_t>::max());

  TokenizerSpec spec;
  RETURN_IF_ERROR(ReadVocab(*vocab, &spec));
  RETURN_IF_ERROR(ReadAddedTokens(root, &spec));
  ASSIGN_OR_RETURN(auto merges, ReadMerges(model));

  const json null_json;
  const json& pre = root.contains("pre_tokenizer") ? root["pre_tokenizer"] : null_json;
  const json& normalizer = root.contains("normalizer") ? root["normalizer"] : null_json;
  bool byte_level = false;
  for (const json* step : Steps(pre, "pretokenizers")) byte_level |= TypeOf(*step) == "ByteLevel";

  if (byte_level) {
    spec.model = TokenizerSpec::Model::kByteLevelBpe;
    ASSIGN_OR_RETURN(spec.pre, ByteLevelRegexKind(pre));
    spec.add_space_prefix = false;
    spec.merges.reserve(merges.size());
    for (auto& [left, right] : merges) spec.merges.push_back(absl::StrCat(left, " ", right));
  } else {
    // SentencePiece converted: spaces become "▁" through the normalizer or Metaspace.
    bool prepend = false;
    bool replaces_space = false;
    for (const json* step : Steps(normalizer, "normalizers")) {
      const std::string type = TypeOf(*step);
      if (type == "Prepend" && StringField(*step, "prepend") == kSpaceMarker) prepend = true;
      if (type == "Replace" && StringField(*step, "content") == kSpaceMarker) replaces_space = true;
    }
    for (const json* step : Steps(pre, "pretokenizers")) {
      if (TypeOf(*step) != "Metaspace") continue;
      replaces_space = true;
      const std::string scheme = StringField(*step, "prepend_scheme");
      prepend |= scheme == "always" || scheme == "first" ||
                 (scheme.empty() && BoolField(*step, "add_prefix_space", true));
    }
    if (!replaces_space && !BoolField(model, "byte_fallback", false)) {
      return Error("pre_tokenizer",
                   "is neither ByteLevel nor SentencePiece-style (Metaspace, or a normalizer "
                   "replacing ' ' by '▁' with model.byte_fallback)");
    }
    spec.model = TokenizerSpec::Model::kSentencePieceBpe;
    spec.add_space_prefix = prepend;
    // Merge rank becomes score: the earlier the merge producing a token, the higher.
    spec.scores.assign(spec.tokens.size(), kUnmergedScore);
    std::vector<bool> scored(spec.tokens.size(), false);
    for (size_t rank = 0; rank < merges.size(); ++rank) {
      const int32_t id = IdOf(merges[rank].first + merges[rank].second);
      if (id < 0 || scored[id]) continue;
      scored[id] = true;
      spec.scores[id] = -static_cast<float>(rank);
    }
    if (BoolField(model, "byte_fallback", false)) {
      for (size_t id = 0; id < spec.tokens.size(); ++id) {
        if (spec.token_types[id] == TokenType::kNormal &&
            ParseByteTokenName(spec.tokens[id]) >= 0) {
          spec.token_types[id] = TokenType::kByte;
        }
      }
    }
  }
  ChooseSpecialIds(root, model, &spec);
  if (spec.tokens.size() < 2) {
    return Error("model.vocab", absl::StrCat("holds ", spec.tokens.size(),
                                             " token(s) with added_tokens; a vocabulary needs "
                                             "at least 2"));
  }
  return spec;
}

absl::Status HfJsonReader::CheckId(std::string_view field, std::string_view piece,
                                   int64_t id) const {
  if (id >= 0 && id < id_limit_) return absl::OkStatus();
  return Error(field, absl::StrCat("entry ", Quoted(piece), " has id ", id, ", outside [0, ",
                                   id_limit_, ") (", id_limit_reason_, ")"));
}

absl::Status HfJsonReader::ReadVocab(const json& vocab, TokenizerSpec* spec) {
  int64_t max_id = -1;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const json& id = it.value();
    if (!id.is_number_integer()) {
      return Error("model.vocab", absl::StrCat("entry ", Quoted(it.key()),
                                               " has no valid id (not an integer)"));
    }
    // An unsigned id above INT64_MAX is refused like a negative one.
    RETURN_IF_ERROR(CheckId("model.vocab", it.key(),
                            id.is_number_unsigned() && id.get<uint64_t>() > INT64_MAX
                                ? -1 : id.get<int64_t>()));
    max_id = std::max<int64_t>(max_id, id.get<int64_t>());
  }
  spec->tokens.assign(max_id + 1, "");
  spec->token_types.assign(max_id + 1, TokenType::kUnused);  // gaps stay unused
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const int32_t id = it.value().get<int32_t>();
    spec->tokens[id] = it.key();
    spec->token_types[id] = TokenType::kNormal;
    ids_.emplace(it.key(), id);
    max_piece_size_ = std::max(max_piece_size_, it.key().size());
  }
  return absl::OkStatus();
}

absl::Status HfJsonReader::ReadAddedTokens(const json& root, TokenizerSpec* spec) {
  auto added = root.find("added_tokens");
  if (added == root.end() || added->is_null()) return absl::OkStatus();
  if (!added->is_array()) return Error("added_tokens", "is not an array");
  for (const json& token : *added) {
    auto id_it = token.is_object() ? token.find("id") : token.end();
    if (!token.is_object() || id_it == token.end() || !id_it->is_number_integer() ||
        !token.contains("content") || !token["content"].is_string()) {
      return Error("added_tokens", "has an entry without a valid id and content");
    }
    RETURN_IF_ERROR(CheckId("added_tokens", token["content"].get_ref<const std::string&>(),
                            id_it->is_number_unsigned() && id_it->get<uint64_t>() > INT64_MAX
                                ? -1 : id_it->get<int64_t>()));
    const auto id = static_cast<int32_t>(id_it->get<int64_t>());
    if (static_cast<size_t>(id) >= spec->tokens.size()) {
      spec->tokens.resize(id + 1);
      spec->token_types.resize(id + 1, TokenType::kUnused);
    }
    spec->tokens[id] = token["content"].get<std::string>();
    spec->token_types[id] =
        BoolField(token, "special", false) ? TokenType::kControl : TokenType::kUserDefined;
    ids_[spec->tokens[id]] = id;
    max_piece_size_ = std::max(max_piece_size_, spec->tokens[id].size());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> HfJsonReader::ReadMerges(
    const json& model) const {
  std::vector<std::pair<std::string, std::string>> merges;
  auto list = model.find("merges");
  if (list == model.end() || list->is_null()) return merges;
  if (!list->is_array()) return Error("model.merges", "is not an array");
  merges.reserve(list->size());
  for (size_t i = 0; i < list->size(); ++i) {
    const json& m = (*list)[i];
    if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
      continue;
    }
    if (!m.is_string()) return Error("model.merges", absl::StrCat("entry ", i, " is malformed"));
    // "a b": pieces may hold spaces in SentencePiece vocabs; take the split whose halves
    // are both tokens, else the first space.
    const std::string s = m.get<std::string>();
    size_t split = s.find(' ');
    if (split == std::string::npos) {
      return Error("model.merges", absl::StrCat("entry ", i, " ", Quoted(s), " has no space"));
    }
    // The left half is a token, so no split lies past the longest token: this bounds
    // the search in a merge string of many spaces.
    for (size_t p = split; p != std::string::npos && p <= max_piece_size_;
         p = s.find(' ', p + 1)) {
      if (IdOf(s.substr(0, p)) >= 0 && IdOf(s.substr(p + 1)) >= 0) {
        split = p;
        break;
      }
    }
    merges.emplace_back(s.substr(0, split), s.substr(split + 1));
  }
  return merges;
}

absl::StatusOr<TokenizerSpec::PreTokenizer> HfJsonReader::ByteLevelRegexKind(
    const json& pre) const {
  using Pre = TokenizerSpec::PreTokenizer;
  for (const json* step : Steps(pre, "pretokenizers")) {
    // Digits(individual_digits) before a regex-splitting ByteLevel: StarCoder, SmolLM.
    if (TypeOf(*step) == "Digits" && BoolField(*step, "individual_digits", false)) return Pre::kDigitsGpt2;
  }
  for (const json* step : Steps(pre, "pretokenizers")) {
    if (TypeOf(*step) != "Split") continue;
    auto pattern = step->find("pattern");
    if (pattern == step->end() || !pattern->is_object() || !pattern->contains("Regex") ||
        !(*pattern)["Regex"].is_string()) {
      return Error("pre_tokenizer", "has a Split step without a Regex pattern");
    }
    const std::string regex = (*pattern)["Regex"].get<std::string>();
    for (Pre kind : {Pre::kGpt2, Pre::kLlama3, Pre::kQwen2}) {
      if (regex == PretokenizerPattern(kind)) return kind;
    }
    return Error("pre_tokenizer", absl::StrCat("has an unknown Split regex '", regex,
                                               "' (known: GPT-2, Llama 3, Qwen2)"));
  }
  // A lone ByteLevel step splits with its built-in GPT-2 regex.
  return Pre::kGpt2;
}

void HfJsonReader::ChooseSpecialIds(const json& root, const json& model,
                                    TokenizerSpec* spec) const {
  spec->add_bos = false;
  spec->bos_id = spec->eos_id = spec->unk_id = -1;
  if (root.contains("post_processor")) {
    for (const json* step : Steps(root["post_processor"], "processors")) {
      if (TypeOf(*step) != "TemplateProcessing") continue;
      auto single = step->find("single");
      if (single == step->end() || !single->is_array() || single->empty()) continue;
      const json& first = (*single)[0];
      if (!first.is_object() || !first.contains("SpecialToken")) continue;
      const int32_t id = IdOf(StringField(first["SpecialToken"], "id"));
      if (id >= 0) {
        spec->bos_id = id;
        spec->add_bos = true;
      }
    }
  }
  if (spec->bos_id < 0) {
    for (const char* name : {"<s>", "<|begin_of_text|>", "<|startoftext|>", "<bos>",
                             "<|endoftext|>"}) {
      if ((spec->bos_id = IdOf(name)) >= 0) break;
    }
  }
  for (const char* name : {"</s>", "<|end_of_text|>", "<|endoftext|>", "<eos>", "<|im_end|>"}) {
    if ((spec->eos_id = IdOf(name)) >= 0) break;
  }
  const std::string unk = StringField(model, "unk_token");
  if (!unk.empty()) {
    spec->unk_id = IdOf(unk);
    if (spec->unk_id >= 0 && spec->token_types[spec->unk_id] != TokenType::kUserDefined) {
      spec->token_types[spec->unk_id] = TokenType::kUnknown;
    }
  }
}

}  // namespace

absl::StatusOr<TokenizerSpec> TokenizerSpecFromHfJson(const std::string& path,
                                                      int64_t model_vocab_size) {
  // MappedFile refuses what is not a regular file (a FIFO would block a stream forever).
  absl::StatusOr<std::shared_ptr<MappedFile>> file = MappedFile::Open(path);
  if (!file.ok()) {
    return absl::Status(file.status().code(),
                        absl::StrCat("tokenizer.json: ", file.status().message()));
  }
  return HfJsonReader(path, model_vocab_size)
      .Read(std::string_view(reinterpret_cast<const char*>((*file)->data()), (*file)->size()));
}

absl::StatusOr<TokenizerSpec> TokenizerSpecFromHfJsonText(std::string_view text,
                                                          const std::string& name,
                                                          int64_t model_vocab_size) {
  return HfJsonReader(name, model_vocab_size).Read(text);
}

}  // namespace crossreg
