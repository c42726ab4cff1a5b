// One sequence's decoding state machine. Whoever builds batches (the one-sequence
// driver in generate.h, the scheduler) asks it for rows, runs the forward, and hands
// back the logits of those rows. Between decode iterations the KV cache holds every
// committed token except the newest (x_last), whose row opens the next forward.
//
// Cross-Regression iteration (ALGORITHM.md), with L committed tokens and buffer
// B = [(d_1,q_1)..(d_m,q_m)]:
//   control rows    [x_last, d_1..d_m]           at positions L-1 .. L-1+m  -> P_1..P_{m+1}
//   predictive rows [x_last, d_1.., placeholder] at positions L-1 .. L-2+γ  -> Q_1..Q_γ
// verify d_k against P_k with its cached q_k, commit n accepted + a residual or bonus
// token, roll the KV back to L+n, carry untested drafts, refill from this Q.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "engine/decoding/decoding_config.h"
#include "engine/decoding/draft_length_policy.h"
#include "engine/decoding/energy_acceptor.h"
#include "engine/forward_batch.h"
#include "engine/model/model_config.h"
#include "engine/paged_kv_cache.h"
#include "engine/sampler.h"

namespace crossreg {

enum class FinishReason { kNone, kStop, kLength, kContext };
const char* FinishReasonName(FinishReason r);

struct SpeculativeStats {
  int64_t forwards = 0;   // decode forwards (prefill not counted)
  int64_t drafted = 0;    // draft tokens verified
  int64_t accepted = 0;   // draft tokens accepted
  int64_t committed = 0;  // tokens generated
  int64_t ar_forwards = 0;  // speculative requests: forwards the adaptive γ ran as plain AR
  std::vector<int64_t> drafted_per_position;   // [k-1]: drafts verified at depth k
  std::vector<int64_t> accepted_per_position;  // [k-1]: drafts accepted at depth k
  double tokens_per_forward() const { return forwards ? static_cast<double>(committed) / forwards : 0.0; }
};

// Deliberate exactness bugs, for proving that the statistical tests catch them.
enum class ExactnessFault {
  kNone,
  kVerifyCarriedDraftsWithCurrentQ,  // tests a carried draft against this forward's Q
};

struct DecoderSetup {
  const ModelConfig* model = nullptr;
  SamplingParams sampling;
  DecodingConfig decoding;
  int max_new_tokens = 128;
  bool stop_at_eos = true;
  std::vector<int32_t> stop_ids;   // besides the model's EOS ids
  int32_t placeholder_token = 0;   // fills predictive slots with no draft
  ExactnessFault fault = ExactnessFault::kNone;
};

class SequenceDecoder {
 public:
  // `prompt` must be non-empty and validated by the caller.
  SequenceDecoder(const DecoderSetup& setup, SequenceId seq, std::vector<int32_t> prompt);

  // Appends the rows of the next forward: a prefill chunk of at most
  // `max_prefill_rows` rows, or one decode iteration. Returns the rows added.
  // `cost` (adaptive_gamma requests): what rows cost, to pick this forward's γ'.
  int AddRows(ForwardBatch& batch, int max_prefill_rows, const DraftCost* cost = nullptr);
  // Logits of this decoder's rows with want_logits, in the order it added them.
  // Appends the tokens committed by this forward to `committed`.
  absl::Status OnForward(const float* logits, PagedKvCache& kv, std::vector<int32_t>& committed);
  // The sequence's KV was dropped (preemption): the next rows recompute it into
  // `new_seq` (a fresh, empty sequence of the cache).
  void OnKvDropped(SequenceId new_seq);

  bool prefilling() const { return cached_ < static_cast<int64_t>(tokens_.size()) - 1; }
  bool finished() const { return finish_ != FinishReason::kNone; }
  FinishReason finish_reason() const { return finish_; }
  SequenceId sequence() const { return seq_; }
  const std::vector<int32_t>& tokens() const { return tokens_; }  // prompt + generated
  int64_t num_generated() const { return stats_.committed; }
  const SpeculativeStats& stats() const { return stats_; }
  // Logits that predicted the first generated token.
  const std::vector<float>& first_logits() const { return first_logits_; }
  // KV positions the next forward will append (for admission / preemption decisions).
  int64_t PendingKvRows() const;

 private:
  struct Draft {
    int32_t token = 0;
    std::vector<float> q;  // the processed distribution it was drawn from; empty = one-hot
    bool carried = false;  // survived an earlier verification untested
  };
  static bool IsCrossRegression(DecodingMode m) { return m == DecodingMode::kLossless || m == DecodingMode::kLossy; }
  // Adaptive draft length: γ' for the next forward (0 = AR), with count-based probes.
  int AdaptiveGamma(const DraftCost& cost);
  static constexpr int kFirstProbeInterval = 8;
  static constexpr int kMaxProbeInterval = 128;
  absl::Status OnDecodeForward(const float* logits, PagedKvCache& kv, std::vector<int32_t>& committed);
  int32_t SampleFrom(const std::vector<float>& probs);
  void Commit(const std::vector<int32_t>& tokens, std::vector<int32_t>& committed);
  bool IsStop(int32_t token) const;

  DecoderSetup setup_;
  int vocab_;
  SequenceId seq_;
  std::vector<int32_t> tokens_;
  int64_t cached_ = 0;              // positions whose KV is in the cache
  std::vector<Draft> buffer_;
  Rng rng_;
  EnergyAcceptor acceptor_;
  AcceptanceTracker acceptance_;  // recent per-depth acceptance (adaptive γ)
  DecodingConfig iter_;           // this forward's decoding (γ' when adaptive)
  int ar_streak_ = 0;             // adaptive: consecutive AR forwards since the last probe
  int probe_interval_ = kFirstProbeInterval;
  int probe_forwards_ = 0;        // adaptive: forwards left at full γ after a probe
  SpeculativeStats stats_;
  FinishReason finish_ = FinishReason::kNone;
  std::vector<float> first_logits_;
  // Shape of the forward in flight.
  bool last_was_prefill_ = false;
  int last_rows_ = 0;
  int last_drafts_ = 0;      // m
  int last_predictive_ = 0;  // main predictive chain rows of this forward
  std::vector<int> fork_sizes_;  // forked refill: rows of the chain for outcome n = 0, 1, ..
  // Scratch distributions.
  std::vector<float> p_, q_now_, residual_;
};

}  // namespace crossreg
