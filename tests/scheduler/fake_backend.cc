#include "tests/scheduler/fake_backend.h"

#include <map>

#include "absl/strings/str_cat.h"

namespace crossreg::testing {

ModelConfig FakeModelConfig(int vocab, int max_position) {
  ModelConfig c;
  c.vocab_size = vocab;
  c.hidden_size = 8;
  c.intermediate_size = 8;
  c.num_layers = 1;
  c.num_heads = 1;
  c.num_kv_heads = 1;
  c.head_dim = 8;
  c.max_position = max_position;
  return c;
}

namespace {
int32_t NextToken(int32_t token, int64_t position, int vocab) {
  return static_cast<int32_t>((int64_t{token} * 7 + position) % vocab);
}
}  // namespace

std::vector<int32_t> FakeGreedyContinuation(const std::vector<int32_t>& prompt, int max_new, int vocab) {
  std::vector<int32_t> tokens = prompt;
  std::vector<int32_t> out;
  for (int i = 0; i < max_new; ++i) {
    const int64_t position = static_cast<int64_t>(tokens.size()) - 1;
    tokens.push_back(NextToken(tokens.back(), position, vocab));
    out.push_back(tokens.back());
  }
  return out;
}

void FakeBackend::CloseGate() {
  std::lock_guard<std::mutex> lock(mu_);
  gate_open_ = false;
}

void FakeBackend::OpenGate() {
  std::lock_guard<std::mutex> lock(mu_);
  gate_open_ = true;
  cv_.notify_all();
}

void FakeBackend::WaitForForwardsStarted(int64_t n) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return started_ >= n; });
}

std::vector<FakeBackend::ForwardShape> FakeBackend::shapes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return shapes_;
}

int64_t FakeBackend::forwards() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(shapes_.size());
}

absl::Status FakeBackend::ValidateAndReserve(const ForwardBatch& batch, PagedKvCache& kv) {
  if (batch.rows.empty()) return absl::InvalidArgumentError("fake forward: empty batch");
  std::map<SequenceId, int64_t> next_control;
  for (size_t i = 0; i < batch.rows.size(); ++i) {
    const BatchRow& row = batch.rows[i];
    if (!kv.IsLive(row.seq)) return absl::InvalidArgumentError(absl::StrCat("fake forward: row ", i, ": dead sequence"));
    if (row.token < 0 || row.token >= config_.vocab_size || row.position < 0 ||
        row.position >= config_.max_position) {
      return absl::InvalidArgumentError(absl::StrCat("fake forward: row ", i, ": token or position out of range"));
    }
    if (row.predictive) {
      if (row.position > kv.length(row.seq) + 64) {
        return absl::InvalidArgumentError(absl::StrCat("fake forward: row ", i, ": predictive row too far ahead"));
      }
      continue;
    }
    auto [it, first] = next_control.try_emplace(row.seq, kv.length(row.seq));
    if (row.position != it->second) {
      return absl::InvalidArgumentError(absl::StrCat("fake forward: row ", i, ": expected position ", it->second,
                                                     ", got ", row.position));
    }
    ++it->second;
  }
  int64_t needed = 0;
  for (const auto& [seq, end] : next_control) needed += kv.BlocksNeeded(seq, end);
  if (needed > kv.free_blocks()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("fake forward: KV cache full: needs ", needed, " blocks, ", kv.free_blocks(), " free"));
  }
  for (const auto& [seq, end] : next_control) {
    if (auto s = kv.Reserve(seq, end); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status FakeBackend::Forward(const ForwardBatch& batch, PagedKvCache& kv, std::vector<float>& logits) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    ++started_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return gate_open_; });
  }
  if (auto s = ValidateAndReserve(batch, kv); !s.ok()) return s;
  const int vocab = config_.vocab_size;
  ForwardShape shape;
  shape.rows = static_cast<int>(batch.rows.size());
  shape.logit_rows = batch.num_logit_rows();
  logits.assign(static_cast<size_t>(shape.logit_rows) * vocab, 0.0f);
  std::map<SequenceId, int64_t> appended;
  int64_t j = 0;
  for (const BatchRow& row : batch.rows) {
    if (row.predictive) ++shape.predictive_rows;
    else ++appended[row.seq];
    if (!row.want_logits) continue;
    logits[static_cast<size_t>(j * vocab + NextToken(row.token, row.position, vocab))] = 10.0f;
    ++j;
  }
  for (const auto& [seq, count] : appended) {
    if (auto s = kv.Advance(seq, count); !s.ok()) return s;
  }
  std::lock_guard<std::mutex> lock(mu_);
  shapes_.push_back(shape);
  return absl::OkStatus();
}

}  // namespace crossreg::testing
