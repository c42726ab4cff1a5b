// One Generate call: a gRPC server-streaming reactor that never blocks. It runs on
// raw byte buffers (server/request_parsing.h says why): it authenticates the caller,
// parses and validates the request, takes a stream slot of the caller's principal,
// then submits to the scheduler under the principal as owner. Scheduler events (on
// the scheduler thread) become response messages in a queue; exactly one write is in
// flight at a time and the next starts from OnWriteDone. A cancelled call, a failed
// write or a finished call aborts the scheduler request, so its KV blocks are freed
// at once. Every submitted request ends exactly once, with a reason
// (server/server_metrics.h) that is logged and counted.
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "crossreg/v1/generation.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "scheduler/scheduler.h"
#include "server/request_end.h"
#include "server/request_from_proto.h"
#include "server/security/client_stream_limiter.h"
#include "server/security/token_authenticator.h"
#include "server/server_metrics.h"

namespace crossreg::server {

// What every Generate call shares; owned by the service.
struct GenerateContext {
  Scheduler* scheduler = nullptr;
  DecodingEnvironment env;   // what the engine can do (env.model: the model's config)
  RequestDefaults defaults;  // the server's values for unset fields
  std::atomic<bool>* draining = nullptr;  // true: refuse new calls with UNAVAILABLE
  const TokenAuthenticator* tokens = nullptr;
  ClientStreamLimiter* stream_limiter = nullptr;
  ServerMetrics* metrics = nullptr;  // null: no metrics
};

class GenerateReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  // Checks and submits the request; a refused one finishes at once with its status.
  static GenerateReactor* Start(const GenerateContext& context, grpc::CallbackServerContext* call,
                                const grpc::ByteBuffer& request);

  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;

 private:
  explicit GenerateReactor(const GenerateContext& context);
  void Begin(grpc::CallbackServerContext* call, const grpc::ByteBuffer& request_bytes);
  absl::Status Submit(grpc::CallbackServerContext* call, const grpc::ByteBuffer& request_bytes);
  void AbortInScheduler(absl::Status reason);
  void OnSchedulerEvent(const RequestEvent& event);  // scheduler thread
  // Starts the next write, or Finish once the queue is empty and the status known.
  void Pump();
  // Under mu_: queue the final message(s) and status.
  void EndLocked(grpc::Status status);
  void FillCompleteLocked(v1::Complete& complete, const RequestEvent& finished);
  // Under mu_: the request's end, logged and counted once (later calls do nothing).
  void RecordEndLocked(RequestEndReason reason, const v1::Complete* complete, const absl::Status& error);
  // The call's deadline has passed, or is about to on the client's clock: a stream the
  // client closes now was closed by its deadline.
  bool AtDeadline() const;

  const GenerateContext context_;
  std::shared_ptr<GenerateReactor> self_;  // keeps this alive until OnDone
  std::string request_id_;  // as the client knows it
  std::string principal_;   // the caller: owner of the request in the scheduler
  std::unique_ptr<ClientStreamLimiter::Lease> stream_slot_;  // held until OnDone
  DecodingMode mode_ = DecodingMode::kAutoregressive;
  int64_t prompt_tokens_ = 0;
  const std::chrono::steady_clock::time_point arrival_ = std::chrono::steady_clock::now();
  std::chrono::system_clock::time_point deadline_ = std::chrono::system_clock::time_point::max();

  std::mutex mu_;
  std::deque<v1::GenerateResponse> pending_;
  grpc::ByteBuffer in_flight_message_;  // must live until OnWriteDone
  bool write_in_flight_ = false;
  std::optional<grpc::Status> final_status_;  // set: nothing more will be queued
  bool finish_called_ = false;
  bool done_ = false;
  bool submitted_ = false;
  bool scheduler_ended_ = false;  // its kFinished/kError arrived
  bool end_recorded_ = false;
  int64_t completion_tokens_ = 0;
};

}  // namespace crossreg::server
