// Per-request decoding choice: AR, Cross-Regression (lossless or lossy), or
// prompt-lookup (n-gram) drafting. All speculative modes verify through one path.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace crossreg {

enum class DecodingMode { kAutoregressive, kLossless, kLossy, kNgram };

// Where the Cross-Regression modes' drafts come from (docs/algorithm.md).
//   kChain:  ALGORITHM.md's predictive chain [x_last, d_1 .., placeholders], with forked
//            refill when fork_outcomes > 0;
//   kBlocks: outcome blocks (TiDAR's layout): no predictive chain; for each acceptance
//            outcome n a block of placeholder rows anchored right after d_n, attending
//            the control rows x_last, d_1 .. d_n and itself in both directions.
enum class DraftLayout { kChain, kBlocks };
const char* DraftLayoutName(DraftLayout l);  // "chain", "blocks"
absl::StatusOr<DraftLayout> ParseDraftLayout(const std::string& name);

// How the exact speculative modes (lossless, n-gram) verify a sampled request's drafts
// and how the drafter draws them (docs/algorithm.md "Seed-exact verification"). Greedy
// requests and lossy mode are unaffected.
//   kSeedExact:           at each verified position the target draws its own token with
//                         the position's number (engine/position_random.h); a draft is
//                         accepted iff it is that token, and the first mismatch commits
//                         the drawn one: the output is AR's for the seed, token for token.
//                         The drafter draws from its q with the same number, so both
//                         draws land on the same token whenever q and P agree enough.
//   kSeedExactArgmax:     the same verification; the drafter proposes its most likely token.
//   kSpeculativeSampling: drafts drawn from q, accepted with probability min(1, P/q), a
//                         rejection drawing from normalize(max(0, P − q)): distributed as
//                         AR, but a seed's text differs from AR's.
enum class SampledVerification { kSeedExact, kSeedExactArgmax, kSpeculativeSampling };
const char* SampledVerificationName(SampledVerification v);  // "seed_exact", "seed_exact_argmax", "speculative_sampling"
absl::StatusOr<SampledVerification> ParseSampledVerification(const std::string& name);
const char* DecodingModeName(DecodingMode m);  // "ar", "lossless", "lossy", "ngram"
absl::StatusOr<DecodingMode> ParseDecodingMode(const std::string& name);

struct DecodingConfig {
  DecodingMode mode = DecodingMode::kAutoregressive;
  int gamma = 8;       // predictive rows (draft slots) per forward
  float beta = 0.0f;   // EMA weight of earlier energies, [0, 1); lossy only
  float tau = 0.0f;    // acceptance offset in nats, <= 0; lossy only
  int ngram_max = 3;   // n-gram mode: longest suffix matched
  // Forked refill (docs/algorithm.md): 0 keeps ALGORITHM.md's carry-and-refill rule.
  // R > 0: every acceptance count n < R gets a chain of placeholder rows forked from
  // the predictive chain after d_n, and the main chain gets a placeholder tail; the
  // outcome n picks which one refills the buffer, so drafts never rest on a rejected
  // token for those outcomes. Costs R·depth + depth extra predictive rows.
  int fork_outcomes = 0;
  int fork_depth = 0;  // drafts per fork and tail; 0 = gamma (DefaultForkDepthToTrainedRows)
  // kBlocks: fork_outcomes R > 0 gives blocks to the outcomes n < R and n = m only (the
  // others carry their untested drafts); 0 gives every outcome 0 .. m a block.
  // fork_depth is the drafts per block.
  DraftLayout draft_layout = DraftLayout::kChain;
  // Cross-Regression modes: where the committed text repeats (prompt lookup finds an
  // n-gram match), those drafts replace the buffer's first slots. The choice rests on
  // committed tokens only, so it stays exact (docs/algorithm.md).
  bool ngram_assist = false;
  // Speculative modes: before each forward pick the draft length γ' ∈ [0, gamma] that
  // maximises expected tokens per second from recent acceptance and the measured
  // forward cost curve (0 = a plain AR forward); gamma is the ceiling. Needs a cost
  // curve from the caller (draft_length_policy.h); ignored without one.
  bool adaptive_gamma = false;
  // Lossless and n-gram at T > 0; must stay the default in other modes.
  SampledVerification sampled_verification = SampledVerification::kSeedExact;
  bool blocks() const { return draft_layout == DraftLayout::kBlocks; }
  bool forked() const { return !blocks() && fork_outcomes > 0; }
  // Drafts anchored after the outcome that happened (forks or blocks): every one of the
  // γ draft slots is verified, none is spent on ALGORITHM.md's x_last row.
  bool anchored() const { return forked() || blocks(); }
  // kBlocks: does the outcome n (of m drafts verified) get a block?
  bool BlockFor(int n, int m) const { return fork_outcomes == 0 || n < fork_outcomes || n == m; }
  int ForkDepth() const { return fork_depth > 0 ? fork_depth : gamma; }
};

// A request that leaves fork_depth 0 on the blocks layout, served by a model whose blocks
// were trained `block_rows` deep (ModelConfig::draft_block_rows; 0: not recorded): its
// blocks get min(gamma, block_rows) rows instead of gamma. Other requests are unchanged.
void DefaultForkDepthToTrainedRows(DecodingConfig& config, int block_rows);

// Most rows one decode iteration of a sequence adds to a forward (control rows,
// predictive chains and forks); the decoder never exceeds it.
int MaxDecodeRows(const DecodingConfig& config);

// The engine's limit on gamma (draft slots per sequence and forward).
inline constexpr int kMaxGamma = 64;

// Ranges and combinations; each message starts with its field ("decoding.beta: ...").
// `has_adapter`: Cross-Regression modes need a predictive-stream adapter;
// `has_cost_curve`: adaptive_gamma needs a measured forward cost curve. Both are
// FAILED_PRECONDITION when missing (the request is fine, the engine cannot run it).
absl::Status ValidateDecodingConfig(const DecodingConfig& config, int max_gamma, bool has_adapter,
                                    bool has_cost_curve);

}  // namespace crossreg
