#include "tests/testing/hf_tokenizer_writer.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/pretokenizer_regex.h"
#include "engine/tokenizer/utf8.h"
#include "nlohmann/json.hpp"

namespace crossreg::testing {
namespace {

using json = nlohmann::json;
using TokenType = TokenizerSpec::TokenType;
constexpr const char* kSpaceMarker = "\xE2\x96\x81";  // "▁"

TokenType TypeOf(const TokenizerSpec& spec, size_t id) {
  return id < spec.token_types.size() ? spec.token_types[id] : TokenType::kNormal;
}

bool IsNormal(TokenType type) { return type == TokenType::kNormal || type == TokenType::kUndefined; }

json AddedTokens(const TokenizerSpec& spec) {
  json added = json::array();
  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    const TokenType type = TypeOf(spec, id);
    if (IsNormal(type) || type == TokenType::kByte) continue;
    added.push_back({{"id", id},
                     {"content", spec.tokens[id]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", type != TokenType::kUserDefined}});
  }
  return added;
}

json PostProcessor(const TokenizerSpec& spec, bool byte_level) {
  if (spec.add_bos && spec.bos_id >= 0) {
    const std::string& bos = spec.tokens[spec.bos_id];
    return {{"type", "TemplateProcessing"},
            {"single", json::array({{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}},
                                    {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
            {"pair", json::array({{{"SpecialToken", {{"id", bos}, {"type_id", 0}}}},
                                  {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                  {{"SpecialToken", {{"id", bos}, {"type_id", 1}}}},
                                  {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}})},
            {"special_tokens",
             {{bos, {{"id", bos}, {"ids", {spec.bos_id}}, {"tokens", {bos}}}}}}};
  }
  if (byte_level) {
    return {{"type", "ByteLevel"}, {"add_prefix_space", true}, {"trim_offsets", false},
            {"use_regex", true}};
  }
  return nullptr;
}

// HF's SentencePiece converter: every split of a token into two vocab pieces is a merge;
// merges are ranked by the merged token's score, best first.
json SentencePieceMerges(const TokenizerSpec& spec, const std::map<std::string, size_t>& vocab) {
  struct Merge {
    float score;
    size_t id;
    size_t split;
    std::string left, right;
  };
  std::vector<Merge> merges;
  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    if (!IsNormal(TypeOf(spec, id))) continue;
    const std::string& piece = spec.tokens[id];
    size_t split = 0;
    for (std::string_view c : utf8::SplitChars(piece)) {
      split += c.size();
      if (split == piece.size()) break;
      auto left = vocab.find(piece.substr(0, split));
      auto right = vocab.find(piece.substr(split));
      if (left == vocab.end() || right == vocab.end() || !IsNormal(TypeOf(spec, left->second)) ||
          !IsNormal(TypeOf(spec, right->second))) {
        continue;
      }
      const float score = spec.scores.empty() ? 0.0f : spec.scores[id];
      merges.push_back({score, id, split, left->first, right->first});
    }
  }
  std::stable_sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) {
    return std::tie(b.score, a.id, a.split) < std::tie(a.score, b.id, b.split);
  });
  json list = json::array();
  for (const Merge& m : merges) list.push_back(json::array({m.left, m.right}));
  return list;
}

}  // namespace

absl::Status WriteHfTokenizerJson(const TokenizerSpec& spec, const std::string& path) {
  const bool byte_level = spec.model == TokenizerSpec::Model::kByteLevelBpe;
  std::map<std::string, size_t> vocab;
  for (size_t id = 0; id < spec.tokens.size(); ++id) {
    if (!vocab.emplace(spec.tokens[id], id).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot write tokenizer.json: token '", spec.tokens[id], "' appears twice (ids ",
          vocab[spec.tokens[id]], " and ", id, ")"));
    }
  }
  json vocab_json = json::object();
  for (const auto& [piece, id] : vocab) vocab_json[piece] = id;

  json root;
  root["version"] = "1.0";
  root["truncation"] = nullptr;
  root["padding"] = nullptr;
  root["added_tokens"] = AddedTokens(spec);
  root["post_processor"] = PostProcessor(spec, byte_level);
  std::string unk = spec.unk_id >= 0 ? spec.tokens[spec.unk_id] : "";
  json model = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", unk.empty() ? json(nullptr) : json(unk)},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", !byte_level},
                {"byte_fallback", !byte_level},
                {"ignore_merges", byte_level && spec.pre == TokenizerSpec::PreTokenizer::kLlama3}};
  model["vocab"] = std::move(vocab_json);

  if (byte_level) {
    root["normalizer"] = nullptr;
    const json byte_level_step = {{"type", "ByteLevel"},
                                  {"add_prefix_space", false},
                                  {"trim_offsets", true},
                                  {"use_regex", spec.pre == TokenizerSpec::PreTokenizer::kGpt2}};
    if (spec.pre == TokenizerSpec::PreTokenizer::kGpt2) {
      root["pre_tokenizer"] = byte_level_step;
    } else {
      json split = {{"type", "Split"},
                    {"pattern", {{"Regex", std::string(PretokenizerPattern(spec.pre))}}},
                    {"behavior", "Isolated"},
                    {"invert", false}};
      root["pre_tokenizer"] = {{"type", "Sequence"},
                               {"pretokenizers", json::array({split, byte_level_step})}};
    }
    root["decoder"] = {{"type", "ByteLevel"}, {"add_prefix_space", true},
                       {"trim_offsets", true}, {"use_regex", true}};
    model["merges"] = spec.merges;  // already "left right" by rank
  } else {
    json replace = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kSpaceMarker}};
    json normalizers = json::array();
    if (spec.add_space_prefix) normalizers.push_back({{"type", "Prepend"}, {"prepend", kSpaceMarker}});
    normalizers.push_back(replace);
    root["normalizer"] = {{"type", "Sequence"}, {"normalizers", normalizers}};
    root["pre_tokenizer"] = nullptr;
    json decoders = json::array(
        {{{"type", "Replace"}, {"pattern", {{"String", kSpaceMarker}}}, {"content", " "}},
         {{"type", "ByteFallback"}},
         {{"type", "Fuse"}}});
    if (spec.add_space_prefix) {
      decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
    }
    root["decoder"] = {{"type", "Sequence"}, {"decoders", decoders}};
    model["merges"] = SentencePieceMerges(spec, vocab);
  }
  root["model"] = std::move(model);

  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return absl::InternalError(absl::StrCat("cannot create ", path));
  // Invalid UTF-8 in a piece is written as U+FFFD rather than throwing.
  out << root.dump(-1, ' ', false, json::error_handler_t::replace);
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace crossreg::testing
