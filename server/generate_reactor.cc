#include "server/admission.h"
#include "server/generate_reactor.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "scheduler/cancel_cause.h"
#include "server/request_end.h"
#include "server/grpc_status.h"
#include "server/request_parsing.h"
#include "server/security/call_principal.h"
#include "server/security/request_id.h"
#include "spdlog/spdlog.h"

namespace crossreg::server {
namespace {

// How far ahead of our copy of a call's deadline the client's own copy may pass (the
// time the call spent in transit and queued before it was read).
constexpr auto kDeadlineSkew = std::chrono::milliseconds(250);

double SecondsSince(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// The client's deadline on the scheduler's clock; none for "infinite".
std::optional<SteadyTime> SteadyDeadline(const grpc::CallbackServerContext& call) {
  const auto deadline = call.deadline();
  const auto now = std::chrono::system_clock::now();
  if (deadline >= now + std::chrono::hours(24 * 365)) return std::nullopt;
  return std::chrono::steady_clock::now() +
         std::chrono::duration_cast<std::chrono::steady_clock::duration>(deadline - now);
}

v1::FinishReason ToProtoFinishReason(FinishReason reason, StopReason stop) {
  switch (reason) {
    case FinishReason::kStop:
      return stop == StopReason::kEos ? v1::FINISH_REASON_EOS : v1::FINISH_REASON_STOP;
    case FinishReason::kLength:
      return v1::FINISH_REASON_LENGTH;
    case FinishReason::kContext:
      return v1::FINISH_REASON_CONTEXT;
    case FinishReason::kNone:
      break;
  }
  return v1::FINISH_REASON_UNSPECIFIED;
}

}  // namespace

GenerateReactor::GenerateReactor(const GenerateContext& context) : context_(context) {}

GenerateReactor* GenerateReactor::Start(const GenerateContext& context, grpc::CallbackServerContext* call,
                                        const grpc::ByteBuffer& request) {
  std::shared_ptr<GenerateReactor> reactor(new GenerateReactor(context));
  reactor->self_ = reactor;
  GenerateReactor* raw = reactor.get();
  raw->Begin(call, request);
  return raw;
}

void GenerateReactor::Begin(grpc::CallbackServerContext* call, const grpc::ByteBuffer& request_bytes) {
  const absl::Status submitted = Submit(call, request_bytes);
  if (submitted.ok()) return;
  // Debug level: refusals are the client's business, and a client could flood the log.
  spdlog::debug("Generate refused after {:.3f} ms: client={} {}", SecondsSince(arrival_) * 1e3,
                principal_.empty() ? "(unauthenticated)" : principal_, submitted.ToString());
  {
    std::lock_guard<std::mutex> lock(mu_);
    final_status_ = ToGrpcStatus(submitted);
  }
  Pump();
}

absl::Status GenerateReactor::Submit(grpc::CallbackServerContext* call, const grpc::ByteBuffer& request_bytes) {
  // Cheapest checks first: nothing is parsed for a caller without credentials, and
  // nothing is tokenized for one over its stream limit.
  if (context_.draining->load()) return absl::UnavailableError("server is shutting down; retry on another replica");
  auto principal = CallPrincipal(*call, *context_.tokens);
  if (!principal.ok()) return principal.status();
  principal_ = std::move(*principal);
  if (const size_t limit = context_.defaults.max_prompt_bytes; limit > 0 && request_bytes.Length() > limit) {
    // Possibly a huge prompt: measure it on the wire before parsing (and copying) it.
    auto text_bytes = TopLevelFieldBytes(request_bytes, v1::GenerateRequest::kTextFieldNumber);
    if (!text_bytes.ok()) return text_bytes.status();
    if (*text_bytes > limit) return PromptTooLong(*text_bytes, limit);
  }
  v1::GenerateRequest request;
  if (absl::Status parsed = ParseRequest(request_bytes, request); !parsed.ok()) return parsed;
  const AdmissionContext admission{.scheduler = context_.scheduler,
                                   .env = &context_.env,
                                   .defaults = &context_.defaults,
                                   .stream_limiter = context_.stream_limiter,
                                   .draining = context_.draining};
  auto admitted = Admit(admission, principal_, SteadyDeadline(*call),
                        [&request]() -> absl::StatusOr<v1::GenerateRequest> { return std::move(request); });
  if (!admitted.ok()) return admitted.status();
  stream_slot_ = std::move(admitted->stream_slot);
  GenerationRequest spec = std::move(admitted->request);
  deadline_ = call->deadline();
  request_id_ = spec.request_id;
  mode_ = spec.decoding.mode;
  prompt_tokens_ = static_cast<int64_t>(spec.prompt_ids.size());
  {
    std::lock_guard<std::mutex> lock(mu_);
    submitted_ = true;
  }
  std::shared_ptr<GenerateReactor> self = self_;
  absl::Status submitted = SubmitAdmitted(admission, std::move(spec),
                                          [self](const RequestEvent& event) { self->OnSchedulerEvent(event); });
  if (submitted.ok()) return submitted;
  std::lock_guard<std::mutex> lock(mu_);
  submitted_ = false;
  return submitted;
}

void GenerateReactor::AbortInScheduler(absl::Status reason) {
  context_.scheduler->Abort(request_id_, std::move(reason), principal_);
}

void GenerateReactor::FillCompleteLocked(v1::Complete& complete, const RequestEvent& finished) {
  complete.set_request_id(request_id_);
  complete.mutable_usage()->set_prompt_tokens(prompt_tokens_);
  complete.mutable_usage()->set_completion_tokens(completion_tokens_);
  complete.mutable_usage()->set_cached_prompt_tokens(finished.cached_prompt_tokens);
  complete.mutable_usage()->set_seed(finished.seed);
  v1::SpeculativeStats& spec = *complete.mutable_spec();
  const SpeculativeStats& s = finished.stats;
  spec.set_forwards(s.forwards);
  spec.set_drafted(s.drafted);
  spec.set_accepted(s.accepted);
  for (int64_t a : s.accepted_per_position) spec.add_accepted_per_position(a);
  spec.set_tokens_per_forward(s.tokens_per_forward());
  spec.set_ar_forwards(s.ar_forwards);
  v1::Timings& timings = *complete.mutable_timings();
  timings.set_queue_seconds(finished.timings.queue_seconds);
  timings.set_time_to_first_token_seconds(finished.timings.time_to_first_token);
  timings.set_total_seconds(finished.timings.total_seconds);
  complete.set_finish_reason(ToProtoFinishReason(finished.finish_reason, finished.stop_reason));
}

void GenerateReactor::RecordEndLocked(RequestEndReason reason, const v1::Complete* complete,
                                      const absl::Status& error) {
  if (end_recorded_ || !submitted_) return;
  end_recorded_ = true;
  RequestEnd end;
  end.api = "grpc";
  end.request_id = request_id_;
  end.client = principal_;
  end.mode = mode_;
  end.reason = reason;
  end.prompt_tokens = prompt_tokens_;
  end.completion_tokens = completion_tokens_;
  if (complete != nullptr) {
    end.cached_prompt_tokens = complete->usage().cached_prompt_tokens();
    end.finish = v1::FinishReason_Name(complete->finish_reason());
    end.tokens_per_forward = complete->spec().tokens_per_forward();
    end.timings = RequestTimings{.queue_seconds = complete->timings().queue_seconds(),
                                 .time_to_first_token = complete->timings().time_to_first_token_seconds(),
                                 .total_seconds = complete->timings().total_seconds()};
  }
  end.total_seconds = SecondsSince(arrival_);
  end.error = error;
  RecordRequestEnd(context_.metrics, end);
}

void GenerateReactor::EndLocked(grpc::Status status) {
  if (!final_status_) final_status_ = std::move(status);
}

void GenerateReactor::OnSchedulerEvent(const RequestEvent& event) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    const bool terminal = event.kind != RequestEvent::Kind::kTokens;
    if (terminal) scheduler_ended_ = true;
    if (done_ || final_status_) return;  // ended here already (a failed write)
    switch (event.kind) {
      case RequestEvent::Kind::kTokens: {
        completion_tokens_ += static_cast<int64_t>(event.tokens.size());
        v1::GenerateResponse response;
        v1::Chunk& chunk = *response.mutable_chunk();
        chunk.mutable_token_ids()->Add(event.tokens.begin(), event.tokens.end());
        chunk.set_text(event.text);
        for (const TokenLogprob& lp : event.logprobs) {
          v1::TokenLogprob& out = *chunk.add_logprobs();
          out.set_token_id(lp.token);
          out.set_logprob(lp.logprob);
          for (const auto& [token, logprob] : lp.top) {
            v1::TopLogprob& top = *out.add_top();
            top.set_token_id(token);
            top.set_logprob(logprob);
          }
        }
        pending_.push_back(std::move(response));
        break;
      }
      case RequestEvent::Kind::kFinished: {
        if (!event.text.empty()) {
          v1::GenerateResponse response;
          response.mutable_chunk()->set_text(event.text);
          pending_.push_back(std::move(response));
        }
        v1::GenerateResponse done;
        FillCompleteLocked(*done.mutable_complete(), event);
        RecordEndLocked(EndReasonOfFinish(event.finish_reason), &done.complete(), absl::OkStatus());
        pending_.push_back(std::move(done));
        EndLocked(grpc::Status::OK);
        break;
      }
      case RequestEvent::Kind::kError: {
        v1::GenerateResponse response;
        response.mutable_error()->set_code(static_cast<int>(event.error.code()));
        response.mutable_error()->set_message(std::string(event.error.message()));
        pending_.push_back(std::move(response));
        RecordEndLocked(EndReasonOfError(event.error), nullptr, event.error);
        EndLocked(ToGrpcStatus(event.error));
        break;
      }
    }
  }
  Pump();
}

void GenerateReactor::Pump() {
  bool write = false;
  grpc::Status status;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (write_in_flight_ || finish_called_ || done_) return;
    if (!pending_.empty()) {
      in_flight_message_ = SerializeResponse(pending_.front());
      pending_.pop_front();
      write_in_flight_ = true;
      write = true;
    } else if (final_status_) {
      finish_called_ = true;
      status = *final_status_;
    } else {
      return;
    }
  }
  if (write) {
    StartWrite(&in_flight_message_);
  } else {
    if (context_.metrics != nullptr) context_.metrics->OnGrpcCall("Generate", status.error_code());
    Finish(status);
  }
}

void GenerateReactor::OnWriteDone(bool ok) {
  bool abort = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    write_in_flight_ = false;
    if (!ok) {
      // The client is gone: drop what is queued and stop generating for it. A write
      // can fail on a stream the client's deadline closed before OnCancel runs (a busy
      // server is writing tokens when it passes): that is the deadline, as in OnCancel.
      pending_.clear();
      const bool deadline = AtDeadline();
      const absl::Status closed = deadline ? absl::DeadlineExceededError("the deadline passed")
                                           : absl::CancelledError("the stream was closed");
      RecordEndLocked(deadline ? RequestEndReason::kDeadline : RequestEndReason::kDisconnected, nullptr, closed);
      EndLocked(ToGrpcStatus(closed));
      abort = submitted_ && !scheduler_ended_;
    }
  }
  if (abort) AbortInScheduler(absl::CancelledError("the stream was closed"));
  Pump();
}

bool GenerateReactor::AtDeadline() const {
  // The client's deadline runs from before the call was sent, ours from when it arrived,
  // so the client usually gives up (and closes the stream) a little before our copy
  // passes: an end that close to the deadline is counted as the deadline.
  return std::chrono::system_clock::now() + kDeadlineSkew >= deadline_;
}

void GenerateReactor::OnCancel() {
  bool abort = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    abort = submitted_ && !scheduler_ended_;
    // gRPC also calls OnCancel when the deadline passes; the scheduler's own
    // DEADLINE_EXCEEDED may not have arrived yet.
    const bool deadline = AtDeadline();
    const absl::Status why = deadline ? absl::DeadlineExceededError("the deadline passed")
                                      : absl::CancelledError("the client cancelled the call");
    RecordEndLocked(deadline ? RequestEndReason::kDeadline : RequestEndReason::kCancelled, nullptr, why);
    // The call's status (and crossreg_grpc_requests_total) says which: the scheduler's
    // own error for the abort below would say CANCELLED either way.
    EndLocked(ToGrpcStatus(why));
  }
  if (abort) AbortInScheduler(absl::CancelledError("the client cancelled the call"));
  Pump();
}

void GenerateReactor::OnDone() {
  bool abort = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    abort = submitted_ && !scheduler_ended_;
    RecordEndLocked(RequestEndReason::kCancelled, nullptr, absl::CancelledError("the call ended"));
  }
  if (abort) AbortInScheduler(absl::CancelledError("the call ended"));
  stream_slot_.reset();  // the principal may open another stream now
  // The scheduler's handler may still hold a reference; it sees done_ and ignores
  // events. Otherwise `keep` deletes this reactor on return.
  std::shared_ptr<GenerateReactor> keep = std::move(self_);
}

}  // namespace crossreg::server
