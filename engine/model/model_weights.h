// Host weights of a Llama-family model as typed views, one field per tensor.
// Views point into memory-mapped files or into buffers owned by `storage`.
#pragma once

#include <memory>
#include <vector>

#include "engine/tensor.h"

namespace crossreg {

struct LayerWeights {
  TensorRef attn_norm;  // (hidden) f32
  TensorRef wq;         // (num_heads*head_dim, hidden)
  TensorRef wk;         // (num_kv_heads*head_dim, hidden)
  TensorRef wv;         // (num_kv_heads*head_dim, hidden)
  TensorRef wo;         // (hidden, num_heads*head_dim)
  TensorRef bq;         // (num_heads*head_dim) f32, Qwen2 only
  TensorRef bk;         // (num_kv_heads*head_dim) f32, Qwen2 only
  TensorRef bv;         // (num_kv_heads*head_dim) f32, Qwen2 only
  TensorRef ffn_norm;   // (hidden) f32
  TensorRef w_gate;     // (intermediate, hidden)
  TensorRef w_up;       // (intermediate, hidden)
  TensorRef w_down;     // (hidden, intermediate)
};

// q/k rows are in Hugging Face order (RoPE pairs (i, i+head_dim/2) within a head);
// GGUF `llama` files, which store Meta's interleaved order, are permuted at load.
// Norms and biases are always f32; linear weights keep their stored dtype.
struct ModelWeights {
  TensorRef tok_embeddings;  // (vocab, hidden)
  std::vector<LayerWeights> layers;
  TensorRef final_norm;  // (hidden) f32
  TensorRef output;      // (vocab, hidden); same view as tok_embeddings when tied

  // Keeps mapped files and converted buffers alive for the views above.
  std::vector<std::shared_ptr<const void>> storage;
};

}  // namespace crossreg
