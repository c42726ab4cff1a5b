#include "engine/decoding/sequence_decoder.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/decoding/ngram_drafter.h"

namespace crossreg {

const char* FinishReasonName(FinishReason r) {
  switch (r) {
    case FinishReason::kNone: return "none";
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kContext: return "context";
  }
  return "?";
}

SequenceDecoder::SequenceDecoder(const DecoderSetup& setup, SequenceId seq, std::vector<int32_t> prompt)
    : setup_(setup),
      vocab_(setup.model->vocab_size),
      seq_(seq),
      tokens_(std::move(prompt)),
      rng_(setup.sampling.seed),
      acceptor_(setup.decoding.beta, setup.decoding.tau, std::max(1, setup.decoding.gamma)),
      acceptance_(std::max(1, setup.decoding.gamma)),
      iter_(setup.decoding) {
  const size_t depth = static_cast<size_t>(std::max(1, setup.decoding.gamma));
  stats_.drafted_per_position.assign(depth, 0);
  stats_.accepted_per_position.assign(depth, 0);
}

void SequenceDecoder::OnKvDropped(SequenceId new_seq) {
  seq_ = new_seq;
  cached_ = 0;
}

int64_t SequenceDecoder::PendingKvRows() const {
  if (prefilling()) return static_cast<int64_t>(tokens_.size()) - 1 - cached_;
  return 1 + static_cast<int64_t>(setup_.decoding.mode == DecodingMode::kAutoregressive ? 0 : setup_.decoding.gamma);
}

int SequenceDecoder::AdaptiveGamma(const DraftCost& cost) {
  // Probes use the cheapest draft length that still verifies one draft: they measure
  // depth-1 acceptance, and deeper drafts follow once that pays.
  const int probe = std::min(setup_.decoding.gamma, DraftCapacity(setup_.decoding, 1) > 0 ? 1 : 2);
  if (probe_forwards_ > 0) {  // the forward after an XR probe verifies its drafts
    --probe_forwards_;
    return probe;
  }
  const int chosen = ChooseGamma(setup_.decoding, acceptance_, cost);
  if (chosen > 0) {
    ar_streak_ = 0;
    probe_interval_ = kFirstProbeInterval;
    return chosen;
  }
  // Plain AR forwards learn nothing about acceptance: after a run of them, probe (a
  // count-based choice), backing off exponentially while probes fail.
  if (++ar_streak_ < probe_interval_) return 0;
  ar_streak_ = 0;
  probe_interval_ = std::min(2 * probe_interval_, kMaxProbeInterval);
  probe_forwards_ = IsCrossRegression(setup_.decoding.mode) ? 1 : 0;
  return probe;
}

int SequenceDecoder::AddRows(ForwardBatch& batch, int max_prefill_rows, const DraftCost* cost) {
  const int64_t L = static_cast<int64_t>(tokens_.size());
  if (prefilling()) {
    // Every committed token but the newest goes into the cache without logits.
    const int64_t end = std::min<int64_t>(L - 1, cached_ + std::max(1, max_prefill_rows));
    for (int64_t p = cached_; p < end; ++p) {
      batch.rows.push_back({seq_, static_cast<int32_t>(p), tokens_[static_cast<size_t>(p)], false, false});
    }
    last_was_prefill_ = true;
    last_rows_ = static_cast<int>(end - cached_);
    return last_rows_;
  }
  last_was_prefill_ = false;
  iter_ = setup_.decoding;
  if (setup_.decoding.adaptive_gamma && cost != nullptr && cost->curve != nullptr &&
      setup_.decoding.mode != DecodingMode::kAutoregressive) {
    iter_ = WithGamma(setup_.decoding, AdaptiveGamma(*cost));
  }
  const DecodingConfig& it = iter_;
  const int64_t remaining = setup_.max_new_tokens - stats_.committed;
  const int64_t room = setup_.model->max_position - L;  // drafts whose rows still fit
  const int gamma = it.gamma;
  int m = 0;
  int g = 0;
  switch (it.mode) {
    case DecodingMode::kAutoregressive:
      buffer_.clear();
      break;
    case DecodingMode::kNgram: {
      const int64_t want = std::max<int64_t>(0, std::min<int64_t>({gamma, remaining - 1, room}));
      buffer_.clear();
      for (int32_t t : NgramDrafts(tokens_, it.ngram_max, static_cast<int>(want))) {
        buffer_.push_back(Draft{t, {}, false});
      }
      m = static_cast<int>(buffer_.size());
      break;
    }
    case DecodingMode::kLossless:
    case DecodingMode::kLossy: {
      // Limits depend on counts and positions only, never on drawn values.
      const int64_t cap = it.forked() ? gamma : std::max(gamma - 1, 1);
      if (it.ngram_assist) {
        // Prompt-lookup drafts, a function of the committed tokens alone, take the
        // first slots (one-hot q); the adapter's proposals keep the slots after them.
        const auto found = NgramDrafts(tokens_, it.ngram_max, static_cast<int>(cap));
        if (buffer_.size() < found.size()) buffer_.resize(found.size());
        for (size_t i = 0; i < found.size(); ++i) buffer_[i] = Draft{found[i], {}, false};
      }
      const int64_t keep = std::max<int64_t>(
          0, std::min<int64_t>({static_cast<int64_t>(buffer_.size()), cap, remaining - 1, room}));
      buffer_.resize(static_cast<size_t>(keep));
      m = static_cast<int>(keep);
      g = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>({gamma, room + 1, remaining})));
      break;
    }
  }
  const int32_t base = static_cast<int32_t>(L - 1);
  const int32_t x_last = tokens_.back();
  for (int k = 0; k <= m; ++k) {
    const int32_t token = k == 0 ? x_last : buffer_[static_cast<size_t>(k - 1)].token;
    batch.rows.push_back({seq_, base + k, token, true, false});
  }
  // Main predictive chain (branch 0): [x_last, d_1..d_m, placeholders]. Forked
  // refill gives it a placeholder tail for the outcome n = m, and adds for each outcome
  // n < R a placeholder chain forked after d_n (branch n+1). A chain's length depends
  // on n, m, the room left and the tokens still wanted, never on drawn values; each
  // placeholder row proposes one draft for the buffer after its outcome.
  fork_sizes_.clear();
  const bool forked = IsCrossRegression(it.mode) && it.forked();
  const int f = it.ForkDepth();
  auto useful = [&](int n) {  // drafts worth proposing for the buffer after outcome n
    return static_cast<int>(std::max<int64_t>(0, std::min<int64_t>({f, room - n, remaining - n - 2})));
  };
  if (forked) g = m + 1 + useful(m);
  for (int k = 0; k < g; ++k) {
    const int32_t token = k == 0 ? x_last : (k <= m ? buffer_[static_cast<size_t>(k - 1)].token : setup_.placeholder_token);
    batch.rows.push_back({seq_, base + k, token, true, true, 0});
  }
  for (int n = 0; forked && n < std::min(it.fork_outcomes, m); ++n) {
    const int size = useful(n);
    fork_sizes_.push_back(size);
    for (int j = 0; j < size; ++j) {
      batch.rows.push_back({seq_, base + n + 1 + j, setup_.placeholder_token, true, true, n + 1});
    }
  }
  last_drafts_ = m;
  last_predictive_ = g;
  last_rows_ = m + 1 + g;
  for (int size : fork_sizes_) last_rows_ += size;
  return last_rows_;
}

absl::Status SequenceDecoder::OnForward(const float* logits, PagedKvCache& kv, std::vector<int32_t>& committed) {
  if (finished()) return absl::FailedPreconditionError("decoder: sequence already finished");
  if (last_was_prefill_) {
    cached_ += last_rows_;
    return absl::OkStatus();
  }
  return OnDecodeForward(logits, kv, committed);
}

int32_t SequenceDecoder::SampleFrom(const std::vector<float>& probs) {
  return SampleFromDistribution(probs.data(), vocab_, rng_);
}

absl::Status SequenceDecoder::OnDecodeForward(const float* logits, PagedKvCache& kv,
                                              std::vector<int32_t>& committed) {
  const int m = last_drafts_;
  const int g = last_predictive_;
  const int64_t V = vocab_;
  const float* ctrl = logits;                // P_1 .. P_{m+1}
  const float* pred = logits + (m + 1) * V;  // Q_1 .. Q_g
  const bool greedy = setup_.sampling.greedy();
  const bool lossy = iter_.mode == DecodingMode::kLossy;
  const int64_t L = static_cast<int64_t>(tokens_.size());
  if (stats_.forwards == 0) first_logits_.assign(ctrl, ctrl + V);

  // Verify d_1..d_m in order; stop at the first rejection (Alg. 2).
  acceptor_.Reset();
  std::vector<int32_t> out;
  int n = 0;
  int32_t next = -1;
  for (int k = 1; k <= m; ++k) {
    const Draft& d = buffer_[static_cast<size_t>(k - 1)];
    const float* pk = ctrl + (k - 1) * V;
    ++stats_.drafted_per_position[static_cast<size_t>(k - 1)];
    bool accepted;
    if (greedy) {
      // T = 0: P is one-hot at the argmax. Lossy energies use the untempered logits:
      // E_k = z(d_k) − max z ≤ 0 (docs/algorithm.md).
      const int32_t best = Argmax(pk, vocab_);
      accepted = lossy ? acceptor_.AcceptGreedy(k, static_cast<double>(pk[d.token]) - pk[best], d.token == best)
                       : d.token == best;
      if (!accepted) next = best;  // residual of one-hot P minus one-hot q at d ≠ argmax
    } else {
      ProcessedDistribution(pk, vocab_, setup_.sampling, p_);
      const std::vector<float>* q = &d.q;
      if (setup_.fault == ExactnessFault::kVerifyCarriedDraftsWithCurrentQ && d.carried) {
        ProcessedDistribution(pred + (k - 1) * V, vocab_, setup_.sampling, q_now_);
        q = &q_now_;
      }
      const bool one_hot = q->empty();
      const double qd = one_hot ? 1.0 : (*q)[static_cast<size_t>(d.token)];
      const double energy = std::log(static_cast<double>(p_[static_cast<size_t>(d.token)])) - std::log(qd);
      accepted = acceptor_.Accept(k, energy, std::log(rng_.Uniform()));
      if (!accepted) {
        // Residual: normalize(max(0, P_k − q_k)); all mass in q → sample P_k.
        residual_.assign(static_cast<size_t>(V), 0.0f);
        double sum = 0.0;
        for (int64_t i = 0; i < V; ++i) {
          const double qi = one_hot ? (i == d.token ? 1.0 : 0.0) : (*q)[static_cast<size_t>(i)];
          const double r = std::max(0.0, static_cast<double>(p_[static_cast<size_t>(i)]) - qi);
          residual_[static_cast<size_t>(i)] = static_cast<float>(r);
          sum += r;
        }
        if (sum > 0.0) {
          for (auto& r : residual_) r = static_cast<float>(r / sum);
          next = SampleFrom(residual_);
        } else {
          next = SampleFrom(p_);
        }
      }
    }
    acceptance_.Record(k, accepted);
    if (!accepted) break;
    ++n;
    ++stats_.accepted_per_position[static_cast<size_t>(k - 1)];
    out.push_back(d.token);
  }
  if (n == m) {
    // Every draft accepted: the bonus token comes from P_{m+1} of this forward.
    const float* pb = ctrl + m * V;
    if (greedy) {
      next = Argmax(pb, vocab_);
    } else {
      ProcessedDistribution(pb, vocab_, setup_.sampling, p_);
      next = SampleFrom(p_);
    }
  }
  out.push_back(next);
  ++stats_.forwards;
  if (iter_.mode == DecodingMode::kAutoregressive && setup_.decoding.mode != DecodingMode::kAutoregressive) {
    ++stats_.ar_forwards;
  }
  stats_.drafted += m;
  stats_.accepted += n;

  // Keep the KV of x_last and the accepted drafts; drop the rest.
  if (auto s = kv.Truncate(seq_, L + n); !s.ok()) return s;
  cached_ = L + n;

  // Refill: old slot j+c becomes slot j. Untested drafts carry with their cached q;
  // empty slots take fresh samples from this forward's Q at their old slot. Forked
  // refill: outcomes with their own chain (n = m, and n < R) take that chain's
  // proposals instead. Which rows refill depends on n and m only.
  if (IsCrossRegression(iter_.mode)) {
    const int c = n + 1;
    std::vector<Draft> refilled;
    auto propose = [&](const float* qs) {
      Draft fresh;
      if (greedy) {
        fresh.token = Argmax(qs, vocab_);
      } else {
        ProcessedDistribution(qs, vocab_, setup_.sampling, fresh.q);
        fresh.token = SampleFrom(fresh.q);
      }
      refilled.push_back(std::move(fresh));
    };
    const bool forked = iter_.forked();
    if (forked && n == m) {
      for (int k = m + 1; k < g; ++k) propose(pred + k * V);  // the main chain's placeholder tail
    } else if (forked && n < static_cast<int>(fork_sizes_.size())) {
      const float* fork = pred + g * V;
      for (int b = 0; b < n; ++b) fork += fork_sizes_[static_cast<size_t>(b)] * V;
      for (int j = 0; j < fork_sizes_[static_cast<size_t>(n)]; ++j) propose(fork + j * V);
    } else {
      for (int s = c + 1; s <= m; ++s) {
        Draft carried = std::move(buffer_[static_cast<size_t>(s - 1)]);
        carried.carried = true;
        refilled.push_back(std::move(carried));
      }
      for (int s = std::max(m, c) + 1; s <= g; ++s) propose(pred + (s - 1) * V);
    }
    buffer_ = std::move(refilled);
  } else {
    buffer_.clear();
  }
  Commit(out, committed);
  return absl::OkStatus();
}

bool SequenceDecoder::IsStop(int32_t token) const {
  if (setup_.stop_at_eos) {
    const auto& eos = setup_.model->eos_token_ids;
    if (std::find(eos.begin(), eos.end(), token) != eos.end()) return true;
  }
  return std::find(setup_.stop_ids.begin(), setup_.stop_ids.end(), token) != setup_.stop_ids.end();
}

void SequenceDecoder::Commit(const std::vector<int32_t>& tokens, std::vector<int32_t>& committed) {
  for (int32_t t : tokens) {
    tokens_.push_back(t);
    ++stats_.committed;
    committed.push_back(t);
    if (IsStop(t)) {
      finish_ = FinishReason::kStop;
      return;
    }
    if (stats_.committed >= setup_.max_new_tokens) {
      finish_ = FinishReason::kLength;
      return;
    }
  }
  // The next forward's first row (x_last) must fit in the context.
  if (static_cast<int64_t>(tokens_.size()) - 1 >= setup_.model->max_position) finish_ = FinishReason::kContext;
}

}  // namespace crossreg
