// What the gRPC layer measures beyond the scheduler's MetricsSink: how every request
// ended (including the ends only the server sees: a client that cancelled or
// disconnected) and every call's status. PrometheusMetrics implements it; the
// service takes a null pointer when metrics are off.
#pragma once

#include <string>

#include "engine/decoding/decoding_config.h"

namespace crossreg::server {

// Why a submitted request ended; each ends exactly once.
enum class RequestEndReason {
  kStop,          // EOS, a stop token or a text stop sequence
  kLength,        // max_tokens
  kContext,       // the model's context length
  kCancelled,     // the client cancelled the call
  kDeadline,      // the client's deadline passed
  kAborted,       // an Abort call
  kDisconnected,  // the stream broke while writing to the client
  kShutdown,      // the server's drain timed out
  kError,         // anything else (KV exhausted, an engine failure)
};
inline constexpr int kNumRequestEndReasons = 9;
const char* RequestEndReasonName(RequestEndReason reason);  // "stop", "length", ...

class ServerMetrics {
 public:
  virtual ~ServerMetrics() = default;
  virtual void OnRequestEnded(DecodingMode mode, RequestEndReason reason) = 0;
  // A finished RPC: method "Generate", "GetModelInfo", "Abort"; code: the gRPC status.
  virtual void OnGrpcCall(const std::string& method, int code) = 0;
  // A finished HTTP request of the OpenAI front door: its route and HTTP status.
  virtual void OnHttpCall(const std::string& route, int status) = 0;
  // A connection the HTTP front door refused at accept for a connection limit:
  // "total" (--http_max_connections) or "per_client" (--http_max_connections_per_client).
  virtual void OnHttpConnectionRefused(const char* limit) = 0;
};

}  // namespace crossreg::server
