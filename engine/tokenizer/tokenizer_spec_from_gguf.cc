// TokenizerSpecFromGguf: the tokenizer.ggml.* keys of a GGUF file.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/io/gguf_file.h"
#include "engine/status_macros.h"
#include "engine/tokenizer/tokenizer.h"

namespace crossreg {
namespace {

using TokenType = TokenizerSpec::TokenType;

absl::Status KeyError(std::string_view key, const absl::Status& cause) {
  return absl::InvalidArgumentError(
      absl::StrCat("GGUF tokenizer key ", std::string(key), ": ", cause.message()));
}

// Optional id key; absent, negative or 0xFFFFFFFF (how some converters write "none")
// means -1. Any other id must name a token: a BOS past the vocabulary silently dropped
// would change every prompt's encoding.
absl::StatusOr<int32_t> OptionalTokenId(const GgufMetadata& metadata, std::string_view key,
                                        size_t vocab_size) {
  if (!metadata.Has(key)) return -1;
  absl::StatusOr<int64_t> id = metadata.GetInt(key);
  if (!id.ok()) return KeyError(key, id.status());
  if (*id < 0 || *id == 0xFFFFFFFF) return -1;
  if (static_cast<uint64_t>(*id) >= vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat("GGUF tokenizer key ", std::string(key), " = ",
                                                   *id, " is outside the vocabulary of ",
                                                   vocab_size, " tokens"));
  }
  return static_cast<int32_t>(*id);
}

absl::StatusOr<bool> OptionalBool(const GgufMetadata& metadata, std::string_view key,
                                  bool default_value) {
  if (!metadata.Has(key)) return default_value;
  absl::StatusOr<bool> value = metadata.GetBool(key);
  if (!value.ok()) return KeyError(key, value.status());
  return *value;
}

absl::StatusOr<TokenizerSpec::PreTokenizer> PreTokenizerFromName(const std::string& name) {
  using Pre = TokenizerSpec::PreTokenizer;
  if (name.empty() || name == "default" || name == "gpt-2" || name == "gpt2") return Pre::kGpt2;
  if (name == "llama-bpe" || name == "llama3" || name == "llama-v3" || name == "smaug-bpe") {
    return Pre::kLlama3;
  }
  if (name == "qwen2") return Pre::kQwen2;
  if (name == "smollm" || name == "starcoder" || name == "refact" || name == "codeshell") return Pre::kDigitsGpt2;
  return absl::InvalidArgumentError(absl::StrCat(
      "GGUF tokenizer.ggml.pre '", name,
      "' is not supported (known: default, gpt-2, llama-bpe, llama3, smaug-bpe, qwen2, smollm, starcoder, refact, "
      "codeshell)"));
}

}  // namespace

absl::StatusOr<TokenizerSpec> TokenizerSpecFromGguf(const GgufMetadata& metadata) {
  TokenizerSpec spec;
  absl::StatusOr<std::string> model = metadata.GetString("tokenizer.ggml.model");
  if (!model.ok()) return KeyError("tokenizer.ggml.model", model.status());
  if (*model == "llama") {
    spec.model = TokenizerSpec::Model::kSentencePieceBpe;
  } else if (*model == "gpt2") {
    spec.model = TokenizerSpec::Model::kByteLevelBpe;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF tokenizer.ggml.model '", *model,
                     "' is not supported (known: llama, gpt2)"));
  }
  const bool is_spm = spec.model == TokenizerSpec::Model::kSentencePieceBpe;

  absl::StatusOr<std::vector<std::string>> tokens =
      metadata.GetStringArray("tokenizer.ggml.tokens");
  if (!tokens.ok()) return KeyError("tokenizer.ggml.tokens", tokens.status());
  spec.tokens = std::move(*tokens);
  const size_t n = spec.tokens.size();
  if (n < 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GGUF tokenizer.ggml.tokens has ", n, " token(s); a vocabulary needs at least 2"));
  }

  if (metadata.Has("tokenizer.ggml.scores")) {
    absl::StatusOr<std::vector<double>> scores = metadata.GetNumberArray("tokenizer.ggml.scores");
    if (!scores.ok()) return KeyError("tokenizer.ggml.scores", scores.status());
    if (scores->size() != n) {
      return absl::InvalidArgumentError(absl::StrCat("GGUF tokenizer.ggml.scores has ",
                                                     scores->size(), " entries for ", n,
                                                     " tokens"));
    }
    spec.scores.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      const double score = (*scores)[i];
      if (std::isnan(score)) {
        return absl::InvalidArgumentError(
            absl::StrCat("GGUF tokenizer.ggml.scores[", i, "] is NaN"));
      }
      // f64 arrays may hold finite values past float's range: clamp them (a conversion
      // out of range is undefined); infinities convert as they are.
      constexpr double kMax = std::numeric_limits<float>::max();
      spec.scores.push_back(
          static_cast<float>(std::isfinite(score) ? std::clamp(score, -kMax, kMax) : score));
    }
  } else if (is_spm) {
    return absl::InvalidArgumentError("GGUF llama vocab has no tokenizer.ggml.scores");
  }

  if (metadata.Has("tokenizer.ggml.token_type")) {
    absl::StatusOr<std::vector<double>> types =
        metadata.GetNumberArray("tokenizer.ggml.token_type");
    if (!types.ok()) return KeyError("tokenizer.ggml.token_type", types.status());
    if (types->size() != n) {
      return absl::InvalidArgumentError(absl::StrCat("GGUF tokenizer.ggml.token_type has ",
                                                     types->size(), " entries for ", n,
                                                     " tokens"));
    }
    spec.token_types.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      const double t = (*types)[i];
      if (!(t >= 0 && t <= 6) || t != std::floor(t)) {
        return absl::InvalidArgumentError(
            absl::StrCat("GGUF tokenizer.ggml.token_type[", i, "] = ", t, " is not 0..6"));
      }
      spec.token_types.push_back(static_cast<TokenType>(static_cast<int32_t>(t)));
    }
  }

  if (!is_spm) {
    absl::StatusOr<std::vector<std::string>> merges =
        metadata.GetStringArray("tokenizer.ggml.merges");
    if (!merges.ok()) return KeyError("tokenizer.ggml.merges", merges.status());
    spec.merges = std::move(*merges);
    std::string pre;
    if (metadata.Has("tokenizer.ggml.pre")) {
      absl::StatusOr<std::string> name = metadata.GetString("tokenizer.ggml.pre");
      if (!name.ok()) return KeyError("tokenizer.ggml.pre", name.status());
      pre = *name;
    }
    ASSIGN_OR_RETURN(spec.pre, PreTokenizerFromName(pre));
  }

  ASSIGN_OR_RETURN(spec.bos_id, OptionalTokenId(metadata, "tokenizer.ggml.bos_token_id", n));
  ASSIGN_OR_RETURN(spec.eos_id, OptionalTokenId(metadata, "tokenizer.ggml.eos_token_id", n));
  ASSIGN_OR_RETURN(spec.unk_id, OptionalTokenId(metadata, "tokenizer.ggml.unknown_token_id", n));
  // llama.cpp's defaults: SPM vocabs add BOS and a space prefix, byte-level ones neither.
  ASSIGN_OR_RETURN(spec.add_bos, OptionalBool(metadata, "tokenizer.ggml.add_bos_token", is_spm));
  ASSIGN_OR_RETURN(spec.add_space_prefix,
                   OptionalBool(metadata, "tokenizer.ggml.add_space_prefix", is_spm));
  return spec;
}

}  // namespace crossreg
