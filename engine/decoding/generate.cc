#include "engine/decoding/generate.h"

#include <chrono>

#include "absl/strings/str_cat.h"

namespace crossreg {
namespace {
double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Frees the sequence however generation ends.
struct SequenceGuard {
  PagedKvCache& kv;
  SequenceId seq;
  ~SequenceGuard() { kv.Free(seq); }
};
}  // namespace

absl::Status ValidateGenerationRequest(const GenerationRequest& request, const ModelConfig& config,
                                       bool has_adapter) {
  if (request.prompt_ids.empty()) return absl::InvalidArgumentError("prompt: empty (it needs at least one token)");
  if (static_cast<int64_t>(request.prompt_ids.size()) >= config.max_position) {
    return absl::InvalidArgumentError(absl::StrCat("prompt: ", request.prompt_ids.size(),
                                                   " tokens, the model's context length is ",
                                                   config.max_position, " (the prompt must be shorter)"));
  }
  for (size_t i = 0; i < request.prompt_ids.size(); ++i) {
    const int32_t id = request.prompt_ids[i];
    if (id < 0 || id >= config.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("prompt: token ", i, " is ", id,
                                                     ", outside the vocabulary [0, ", config.vocab_size, ")"));
    }
  }
  if (request.max_new_tokens < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max_new_tokens must be >= 1, got ", request.max_new_tokens));
  }
  if (request.prefill_chunk < 1) return absl::InvalidArgumentError("prefill_chunk must be >= 1");
  if (request.placeholder_token < 0 || request.placeholder_token >= config.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat("placeholder token ", request.placeholder_token,
                                                   " is outside the vocabulary"));
  }
  if (auto s = request.sampling.Validate(); !s.ok()) return s;
  return ValidateDecodingConfig(request.decoding, kMaxGamma, has_adapter);
}

absl::StatusOr<GenerationResult> Generate(Backend& backend, PagedKvCache& kv, const ModelConfig& config,
                                          const GenerationRequest& request, bool has_adapter,
                                          const std::function<void(const std::vector<int32_t>&)>& on_tokens) {
  if (auto s = ValidateGenerationRequest(request, config, has_adapter); !s.ok()) return s;
  DecoderSetup setup;
  setup.model = &config;
  setup.sampling = request.sampling;
  setup.decoding = request.decoding;
  setup.max_new_tokens = request.max_new_tokens;
  setup.stop_at_eos = request.stop_at_eos;
  setup.stop_ids = request.stop_ids;
  setup.placeholder_token = request.placeholder_token;
  setup.fault = request.fault;
  const SequenceId seq = kv.CreateSequence();
  SequenceGuard guard{kv, seq};
  SequenceDecoder decoder(setup, seq, request.prompt_ids);

  GenerationResult result;
  ForwardBatch batch;
  std::vector<float> logits;
  std::vector<int32_t> committed;
  const auto t0 = std::chrono::steady_clock::now();
  auto t_decode = t0;
  while (!decoder.finished()) {
    const bool prefill = decoder.prefilling();
    batch.rows.clear();
    const DraftCost cost{request.cost_curve, 1};
    decoder.AddRows(batch, request.prefill_chunk, &cost);
    if (auto s = backend.Forward(batch, kv, logits); !s.ok()) return s;
    committed.clear();
    if (auto s = decoder.OnForward(logits.data(), kv, committed); !s.ok()) return s;
    if (prefill) {
      ++result.prefill_forwards;
      t_decode = std::chrono::steady_clock::now();
      continue;
    }
    if (on_tokens && !committed.empty()) on_tokens(committed);
  }
  result.prefill_seconds = std::chrono::duration<double>(t_decode - t0).count();
  result.decode_seconds = SecondsSince(t_decode);
  const auto& tokens = decoder.tokens();
  result.ids.assign(tokens.begin() + static_cast<std::ptrdiff_t>(request.prompt_ids.size()), tokens.end());
  result.prompt_logits = decoder.first_logits();
  result.finish_reason = decoder.finish_reason();
  result.stats = decoder.stats();
  return result;
}

}  // namespace crossreg
