#include "distill/greedy_continuations.h"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>

#include "absl/strings/str_cat.h"

namespace crossreg {
namespace {

// Shared with the scheduler thread's event handlers, which may outlive the call when
// it returns early (the scheduler then cancels what is left into it).
struct ContinuationState {
  std::mutex mu;
  std::condition_variable changed;
  std::vector<int32_t> tokens;  // [examples * window]
  std::vector<int> received;    // per example
  int group = 1;
  std::vector<int64_t> ready;   // followers whose group leader has its first token
  int64_t in_flight = 0;
  int64_t done = 0;
  int64_t committed = 0;
  std::optional<absl::Status> error;  // the first failure
};

void Fail(ContinuationState& state, absl::Status error) {
  if (!state.error.has_value()) state.error = std::move(error);
}

EventHandler HandlerFor(std::shared_ptr<ContinuationState> state, int64_t example, int window,
                        const std::string& request_id) {
  return [state = std::move(state), example, window, request_id](const RequestEvent& e) {
    std::lock_guard<std::mutex> lock(state->mu);
    int& received = state->received[example];
    switch (e.kind) {
      case RequestEvent::Kind::kTokens:
        if (received == 0 && !e.tokens.empty() && state->group > 1 && example % state->group == 0) {
          for (int64_t f = example + 1; f < example + state->group; ++f) state->ready.push_back(f);
          state->changed.notify_all();
        }
        for (int32_t id : e.tokens) {
          if (received < window) state->tokens[example * window + received] = id;
          ++received;
        }
        state->committed += static_cast<int64_t>(e.tokens.size());
        return;
      case RequestEvent::Kind::kFinished:
        if (received != window) {
          Fail(*state, absl::InternalError(absl::StrCat("request ", request_id, " ended with ", received, " of ", window,
                                                        " tokens (finish reason ",
                                                        FinishReasonName(e.finish_reason), ")")));
        }
        break;
      case RequestEvent::Kind::kError:
        Fail(*state, absl::Status(e.error.code(), absl::StrCat("request ", request_id, " failed: ", e.error.message())));
        break;
    }
    --state->in_flight;
    ++state->done;
    state->changed.notify_all();
  };
}

}  // namespace

absl::StatusOr<std::vector<int32_t>> ContinueGreedily(Scheduler& scheduler, const std::vector<int32_t>& stream,
                                                      const PrefixSample& prefixes,
                                                      const GreedyContinuationOptions& options) {
  const int64_t total = static_cast<int64_t>(prefixes.start.size());
  const int window = options.window;
  if (window < 1) return absl::InvalidArgumentError(absl::StrCat("window must be >= 1, got ", window));
  if (prefixes.length.size() != prefixes.start.size()) {
    return absl::InvalidArgumentError("prefixes: as many starts as lengths are needed");
  }
  for (int64_t i = 0; i < total; ++i) {
    if (prefixes.start[i] < 0 || prefixes.length[i] < 1 ||
        prefixes.start[i] > static_cast<int64_t>(stream.size()) - prefixes.length[i]) {
      return absl::InvalidArgumentError(absl::StrCat("prefix ", i, " lies outside the stream"));
    }
  }
  const int group = std::max(1, options.group);
  if (total % group != 0) {
    return absl::InvalidArgumentError(absl::StrCat(total, " prefixes do not form groups of ", group));
  }
  auto state = std::make_shared<ContinuationState>();
  state->group = group;
  state->tokens.assign(static_cast<size_t>(total * window), 0);
  state->received.assign(static_cast<size_t>(total), 0);
  const int64_t max_in_flight = std::max(1, options.max_in_flight);

  const auto begin = std::chrono::steady_clock::now();
  auto last_report = begin;
  // Called with `lock` held; reports without it, so event handlers never wait on output.
  auto report = [&](std::unique_lock<std::mutex>& lock) {
    if (!options.on_progress) return;
    const ContinuationProgress progress{state->done, total, state->committed,
                                        std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count()};
    lock.unlock();
    options.on_progress(progress);
    lock.lock();
  };
  int64_t next = 0;  // the next group leader (or, ungrouped, the next example)
  // Followers first: their leader's blocks are cached now and may be evicted later.
  auto pick = [&]() -> int64_t {
    if (!state->ready.empty()) {
      const int64_t f = state->ready.front();
      state->ready.erase(state->ready.begin());
      return f;
    }
    if (next < total) {
      const int64_t leader = next;
      next += group;
      return leader;
    }
    return -1;
  };
  auto can_submit = [&] { return (!state->ready.empty() || next < total) && state->in_flight < max_in_flight; };
  std::unique_lock<std::mutex> lock(state->mu);
  while (state->done < total && !state->error.has_value()) {
    while (can_submit()) {
      const int64_t example = pick();
      GenerationRequest request;
      request.request_id = absl::StrCat(options.request_id_prefix, example);
      const auto first = stream.begin() + prefixes.start[example];
      request.prompt_ids.assign(first, first + prefixes.length[example]);
      request.max_new_tokens = window;
      request.stop_at_eos = false;  // exactly `window` tokens, EOS or not
      request.decoding.mode = DecodingMode::kAutoregressive;  // the frozen base alone
      request.sampling.temperature = 0.0f;                    // greedy
      EventHandler handler = HandlerFor(state, example, window, request.request_id);
      ++state->in_flight;
      lock.unlock();  // the scheduler may deliver events while Submit runs
      absl::Status submitted = scheduler.Submit(std::move(request), std::move(handler));
      lock.lock();
      if (!submitted.ok()) {
        --state->in_flight;
        Fail(*state, absl::Status(submitted.code(), absl::StrCat("request ", options.request_id_prefix, example,
                                                                 " refused: ", submitted.message())));
        break;
      }
    }
    if (state->error.has_value()) break;
    const auto deadline = last_report + options.progress_interval;
    state->changed.wait_until(lock, deadline, [&] {
      return state->error.has_value() || state->done == total || can_submit();
    });
    if (std::chrono::steady_clock::now() >= deadline) {
      report(lock);
      last_report = std::chrono::steady_clock::now();
    }
  }
  if (state->error.has_value()) return *state->error;
  report(lock);
  return std::move(state->tokens);
}

}  // namespace crossreg
