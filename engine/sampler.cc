#include "engine/sampler.h"

#include <algorithm>
#include <cstring>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "engine/decoding/request_fields.h"
#include "engine/field_violation.h"
#include "engine/status_macros.h"

namespace crossreg {

absl::Status SamplingParams::Validate() const {
  RETURN_IF_ERROR(CheckFieldRange("sampling.temperature", temperature));
  RETURN_IF_ERROR(CheckFieldRange("sampling.top_k", top_k));
  RETURN_IF_ERROR(CheckFieldRange("sampling.top_p", top_p));
  return CheckFieldRange("sampling.min_p", min_p);
}

namespace {
uint64_t SplitMix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
inline uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
}  // namespace

Rng::Rng(uint64_t seed) {
  for (auto& s : s_) s = SplitMix64(seed);
}

uint64_t Rng::Next() {
  const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

double Rng::Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

int32_t Argmax(const float* logits, int vocab) {
  int32_t best = 0;
  for (int32_t i = 1; i < vocab; ++i) {
    if (logits[i] > logits[best]) best = i;
  }
  return best;
}

namespace {

// The octave of a weight e = exp((z - max) / T) in (0, 1]: 0 for e = 1, k for e in
// [2^-k, 2^-(k-1)), kOctaves for e = 0. Larger logits never get a larger octave.
constexpr int kOctaves = 64;
int Octave(float e) {
  if (!(e > 0.0f)) return kOctaves;
  // frexp's exponent (e = m · 2^x, m in [0.5, 1)) read from the bits: a normal float's
  // biased exponent b gives x = b - 126, so the octave is 1 - x = 127 - b; subnormals
  // (b = 0) are past the last octave either way. A libm call per token was ~2% of a
  // sampled server's time.
  uint32_t bits;
  std::memcpy(&bits, &e, sizeof(bits));
  const int biased = static_cast<int>(bits >> 23);
  return biased == 0 ? kOctaves - 1 : std::min(127 - biased, kOctaves - 1);
}

// Top-p without top-k, without sorting the vocabulary: sorting 16,384 ids cost about a
// millisecond a row on the CPU, more than a small model's forward, and verification
// processes every sampled row. Weights are monotone in the logit, so the tokens whose
// weight reaches a power of two are a best-first prefix: one pass sums the mass per
// octave and finds the octave where the running mass reaches top_p; only the tokens
// down to one octave below it (rounding's margin) are sorted. The kept set, its weights
// and the order its mass is summed in are those of sorting every id, so the
// probabilities are too; only the total that top_p is a fraction of is summed in id
// order rather than best-first (its last bits). False: the candidates fell short of the
// target through rounding; the caller sorts everything.
bool NucleusWithoutSorting(const float* logits, int vocab, const SamplingParams& params, std::vector<float>& probs,
                           std::vector<int32_t>& candidates) {
  const float inv_t = 1.0f / params.temperature;
  const float max_logit = logits[Argmax(logits, vocab)];
  double mass[kOctaves + 1] = {};
  double total = 0.0;
  for (int32_t i = 0; i < vocab; ++i) {
    float e = std::exp((logits[i] - max_logit) * inv_t);
    // Relative to the top token, whose weight is exp(0) = 1: the top token always stays.
    if (params.min_p > 0.0f && e < params.min_p) e = 0.0f;
    probs[static_cast<size_t>(i)] = e;
    total += e;
    mass[Octave(e)] += e;
  }
  const double target = params.top_p * total;
  int last = kOctaves - 1;
  double running = 0.0;
  for (int k = 0; k < kOctaves; ++k) {
    running += mass[k];
    if (running >= target) {
      last = std::min(k + 1, kOctaves - 1);
      break;
    }
  }
  candidates.clear();
  for (int32_t i = 0; i < vocab; ++i) {
    if (Octave(probs[static_cast<size_t>(i)]) <= last) candidates.push_back(i);
  }
  std::sort(candidates.begin(), candidates.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  double cum = 0.0;
  size_t n = 0;
  while (n < candidates.size()) {
    cum += probs[static_cast<size_t>(candidates[n])];
    ++n;
    if (cum >= target) break;
  }
  if (cum < target) return false;
  // Zero what is not kept (the candidates past the cut, then every token below the
  // candidates' octaves, which the kept weights are not yet scaled out of), normalise.
  for (size_t j = n; j < candidates.size(); ++j) probs[static_cast<size_t>(candidates[j])] = 0.0f;
  for (float& e : probs) {
    if (Octave(e) > last) e = 0.0f;
  }
  const float inv_sum = static_cast<float>(1.0 / cum);
  for (size_t j = 0; j < n; ++j) probs[static_cast<size_t>(candidates[j])] *= inv_sum;
  return true;
}

}  // namespace

void ProcessedDistribution(const float* logits, int vocab, const SamplingParams& params,
                           std::vector<float>& probs) {
  if (!params.greedy() && params.top_p < 1.0f && !(params.top_k > 0 && params.top_k < vocab)) {
    thread_local std::vector<int32_t> candidates;
    probs.resize(static_cast<size_t>(vocab));
    if (NucleusWithoutSorting(logits, vocab, params, probs, candidates)) return;
  }
  ProcessedDistributionBySorting(logits, vocab, params, probs);
}

void ProcessedDistributionBySorting(const float* logits, int vocab, const SamplingParams& params,
                                    std::vector<float>& probs) {
  probs.assign(static_cast<size_t>(vocab), 0.0f);
  if (params.greedy()) {
    probs[static_cast<size_t>(Argmax(logits, vocab))] = 1.0f;
    return;
  }
  const float inv_t = 1.0f / params.temperature;
  // Candidate ids, best first where a cut needs an order (higher logit, then lower id).
  const bool cut_k = params.top_k > 0 && params.top_k < vocab;
  const bool cut_p = params.top_p < 1.0f;
  auto better = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::vector<int32_t> ids(static_cast<size_t>(vocab));
  std::iota(ids.begin(), ids.end(), 0);
  size_t keep = ids.size();
  if (cut_k) {
    keep = static_cast<size_t>(params.top_k);
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(keep), ids.end(), better);
  } else if (cut_p) {
    std::sort(ids.begin(), ids.end(), better);
  }
  const float max_logit = logits[cut_k || cut_p ? ids[0] : Argmax(logits, vocab)];
  double sum = 0.0;
  for (size_t j = 0; j < keep; ++j) {
    const int32_t id = ids[j];
    const float e = std::exp((logits[id] - max_logit) * inv_t);
    probs[static_cast<size_t>(id)] = e;
    sum += e;
  }
  if (params.min_p > 0.0f) {
    // Relative to the top token, whose term is exp(0) = 1: the top token always stays.
    sum = 0.0;
    for (size_t j = 0; j < keep; ++j) {
      float& e = probs[static_cast<size_t>(ids[j])];
      if (e < params.min_p) e = 0.0f;
      sum += e;
    }
  }
  if (cut_p) {
    // Smallest best-first prefix whose mass reaches top_p; it always keeps one token.
    const double target = params.top_p * sum;
    double cum = 0.0;
    size_t n = 0;
    while (n < keep) {
      cum += probs[static_cast<size_t>(ids[n])];
      ++n;
      if (cum >= target) break;
    }
    for (size_t j = n; j < keep; ++j) probs[static_cast<size_t>(ids[j])] = 0.0f;
    sum = cum;
  }
  const float inv_sum = static_cast<float>(1.0 / sum);
  for (auto& p : probs) p *= inv_sum;
}

namespace {

// One round of an exponential race: entrants come with their mass and a 32-bit number;
// the winner maximises log(u) / mass (ties: the first entered).
class ExponentialRace {
 public:
  void Enter(int32_t who, double mass, uint32_t bits) {
    const double u = (static_cast<double>(bits) + 0.5) * 0x1.0p-32;  // in (0, 1)
    // log(u) <= u - 1: an entrant whose bound cannot pass the leader needs no log.
    if (winner_ >= 0 && u - 1.0 <= best_ * mass) return;
    const double key = std::log(u) / mass;
    if (winner_ < 0 || key > best_) {
      best_ = key;
      winner_ = who;
    }
  }
  int32_t winner() const { return winner_; }

 private:
  double best_ = 0.0;
  int32_t winner_ = -1;
};

// The first round's numbers: blocks past any token's (a token's block is id / 4).
constexpr uint32_t kGroupBlocks = 0x80000000u;

float Positive(float p) { return p > 0.0f ? p : 0.0f; }

}  // namespace

int32_t DrawToken(const float* probs, int vocab, const PositionRandom& random, int64_t position, RandomLane lane) {
  // Round 1: the groups' masses (eight float partial sums each, a fixed order, so that
  // the pass vectorises and stays a function of the values), and their race.
  const int groups = (vocab + kDrawGroup - 1) / kDrawGroup;
  ExponentialRace group_race;
  PhiloxCounter numbers{};
  int64_t loaded = -1;
  for (int g = 0; g < groups; ++g) {
    const int begin = g * kDrawGroup, end = std::min(vocab, begin + kDrawGroup);
    float partial[8] = {};
    int i = begin;
    for (; i + 8 <= end; i += 8) {
      for (int j = 0; j < 8; ++j) partial[j] += Positive(probs[i + j]);
    }
    for (; i < end; ++i) partial[0] += Positive(probs[i]);
    double mass = 0.0;
    for (float p : partial) mass += p;
    if (!(mass > 0.0)) continue;
    if (g / 4 != loaded) {
      loaded = g / 4;
      numbers = random.Block(position, lane, kGroupBlocks + static_cast<uint32_t>(g / 4));
    }
    group_race.Enter(g, mass, numbers[static_cast<size_t>(g % 4)]);
  }
  const int32_t group = group_race.winner();
  if (group < 0) return 0;
  // Round 2: the winning group's tokens, each with its own number.
  ExponentialRace token_race;
  loaded = -1;
  const int begin = group * kDrawGroup, end = std::min(vocab, begin + kDrawGroup);
  for (int i = begin; i < end; ++i) {
    if (!(probs[i] > 0.0f)) continue;
    if (i / 4 != loaded) {
      loaded = i / 4;
      numbers = random.Block(position, lane, static_cast<uint32_t>(i / 4));
    }
    token_race.Enter(i, probs[i], numbers[static_cast<size_t>(i % 4)]);
  }
  return token_race.winner();
}

}  // namespace crossreg
