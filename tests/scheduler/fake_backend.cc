#include "tests/scheduler/fake_backend.h"

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

absl::Status FakeBackend::Compute(const ForwardPlan& plan, ForwardOutput& out) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    ++started_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return gate_open_; });
  }
  const int vocab = model_config().vocab_size;
  ForwardShape shape;
  shape.rows = plan.rows;
  shape.logit_rows = static_cast<int>(plan.logit_rows.size());
  shape.predictive_rows = static_cast<int>(plan.predictive_rows.size());
  shape.summary_rows = static_cast<int>(plan.summary_rows.size());
  std::vector<float> logits(static_cast<size_t>(shape.logit_rows) * vocab, 0.0f);
  for (size_t j = 0; j < plan.logit_rows.size(); ++j) {
    const int r = plan.logit_rows[j];
    logits[j * vocab + NextToken(plan.tokens[r], plan.positions[r], vocab)] = 10.0f;
  }
  SplitLogitRows(plan, logits, vocab, out);
  std::lock_guard<std::mutex> lock(mu_);
  shapes_.push_back(shape);
  return absl::OkStatus();
}

}  // namespace crossreg::testing
