// The typed, validated hyper-parameters of a Llama-family model, read once at load
// from GGUF metadata or a Hugging Face config.json.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace crossreg {

enum class Architecture { kLlama, kMistral, kQwen2 };
std::string ArchitectureName(Architecture a);

// How RoPE frequencies are stretched for long context.
struct RopeScaling {
  enum class Type { kNone, kLinear, kLlama3 };
  Type type = Type::kNone;
  float factor = 1.0f;
  // Llama-3 ("rope_type": "llama3") parameters.
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int original_max_position = 8192;
};

struct ModelConfig {
  Architecture arch = Architecture::kLlama;
  int vocab_size = 0;
  int hidden_size = 0;        // d_model
  int intermediate_size = 0;  // SwiGLU hidden width
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;  // < num_heads means grouped-query attention
  int head_dim = 0;      // usually hidden_size / num_heads
  int max_position = 0;  // context length the engine allows
  float rms_norm_eps = 1e-5f;
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling;
  // Optional per-frequency divisors (GGUF `rope_freqs.weight`, Llama-3); empty = none.
  std::vector<float> rope_freq_factors;
  bool tied_embeddings = false;  // output layer shares the token embedding
  bool qkv_bias = false;         // Qwen2: q/k/v projections carry a bias
  int bos_token_id = -1;
  std::vector<int> eos_token_ids;  // any of them ends generation
  // A model pretrained to draft for itself (a hybrid, no adapter; config.json
  // "crossreg_draft": {"placeholder_token_id": N, "draft_layout": "blocks"}): its
  // predictive rows run on the base weights. -1: not a drafter.
  int draft_placeholder = -1;
  std::string draft_layout = "chain";  // the layout it was trained for: "chain" or "blocks"
  // "block_rows": the rows per outcome block it was trained with (0: not recorded).
  // Requests that leave fork_depth unset draft min(gamma, block_rows) per block: rows
  // past the trained depth cost a forward's time and are rarely accepted.
  int draft_block_rows = 0;
  static constexpr int kMaxDraftBlockRows = 64;
  bool self_drafting() const { return draft_placeholder >= 0; }

  int q_dim() const { return num_heads * head_dim; }
  int kv_dim() const { return num_kv_heads * head_dim; }

  // Checks ranges and divisibility; the message names the offending field.
  absl::Status Validate() const;

  // RoPE inverse frequencies, head_dim/2 entries, with scaling and freq factors
  // applied. Rotation is NeoX/HF style: pairs (i, i + head_dim/2).
  std::vector<float> RopeInverseFrequencies() const;
};

}  // namespace crossreg
