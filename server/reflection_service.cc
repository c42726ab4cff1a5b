#include "server/reflection_service.h"

#include <set>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "server/grpc_status.h"
#include "server/security/call_principal.h"

namespace crossreg::server {
namespace {

using grpc::reflection::v1alpha::ServerReflectionRequest;
using grpc::reflection::v1alpha::ServerReflectionResponse;
namespace pb = google::protobuf;

}  // namespace

// One reflection stream: reads a request, writes its answer, repeats until the
// client half-closes. Files already sent on this stream are not sent again.
class ReflectionService::Reactor final : public grpc::ServerBidiReactor<ServerReflectionRequest, ServerReflectionResponse> {
 public:
  Reactor(const ReflectionService& service, grpc::CallbackServerContext* call) : service_(service) {
    if (auto principal = CallPrincipal(*call, *service_.tokens_); !principal.ok()) {
      Finish(ToGrpcStatus(principal.status()));
      return;
    }
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status::OK);  // the client is done asking
      return;
    }
    Answer();
    StartWrite(&response_);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the stream was closed"));
      return;
    }
    StartRead(&request_);
  }

  void OnDone() override { delete this; }

 private:
  void Answer() {
    response_.Clear();
    response_.set_valid_host(request_.host());
    *response_.mutable_original_request() = request_;
    const pb::DescriptorPool* pool = pb::DescriptorPool::generated_pool();
    switch (request_.message_request_case()) {
      case ServerReflectionRequest::kListServices:
        for (const std::string& name : service_.services_) {
          response_.mutable_list_services_response()->add_service()->set_name(name);
        }
        return;
      case ServerReflectionRequest::kFileByFilename:
        return SendFile(pool->FindFileByName(request_.file_by_filename()), request_.file_by_filename());
      case ServerReflectionRequest::kFileContainingSymbol:
        return SendFile(pool->FindFileContainingSymbol(request_.file_containing_symbol()),
                        request_.file_containing_symbol());
      case ServerReflectionRequest::kFileContainingExtension: {
        const auto& ext = request_.file_containing_extension();
        const pb::Descriptor* type = pool->FindMessageTypeByName(ext.containing_type());
        const pb::FieldDescriptor* field =
            type == nullptr ? nullptr : pool->FindExtensionByNumber(type, ext.extension_number());
        return SendFile(field == nullptr ? nullptr : field->file(), ext.containing_type());
      }
      case ServerReflectionRequest::kAllExtensionNumbersOfType: {
        const pb::Descriptor* type = pool->FindMessageTypeByName(request_.all_extension_numbers_of_type());
        if (type == nullptr) return Error(grpc::StatusCode::NOT_FOUND, "type not found");
        std::vector<const pb::FieldDescriptor*> extensions;
        pool->FindAllExtensions(type, &extensions);
        auto* out = response_.mutable_all_extension_numbers_response();
        out->set_base_type_name(type->full_name());
        for (const pb::FieldDescriptor* e : extensions) out->add_extension_number(e->number());
        return;
      }
      case ServerReflectionRequest::MESSAGE_REQUEST_NOT_SET:
        break;
    }
    Error(grpc::StatusCode::INVALID_ARGUMENT, "empty reflection request");
  }

  // `file` and every file it imports, transitively, that this stream has not sent.
  void SendFile(const pb::FileDescriptor* file, const std::string& asked) {
    if (file == nullptr) return Error(grpc::StatusCode::NOT_FOUND, "not found: " + asked);
    auto* out = response_.mutable_file_descriptor_response();
    std::vector<const pb::FileDescriptor*> pending = {file};
    while (!pending.empty()) {
      const pb::FileDescriptor* f = pending.back();
      pending.pop_back();
      if (!sent_.insert(f->name()).second) continue;
      pb::FileDescriptorProto proto;
      f->CopyTo(&proto);
      out->add_file_descriptor_proto(proto.SerializeAsString());
      for (int i = 0; i < f->dependency_count(); ++i) pending.push_back(f->dependency(i));
    }
  }

  void Error(grpc::StatusCode code, const std::string& message) {
    auto* error = response_.mutable_error_response();
    error->set_error_code(static_cast<int>(code));
    error->set_error_message(message);
  }

  const ReflectionService& service_;
  ServerReflectionRequest request_;
  ServerReflectionResponse response_;
  std::set<std::string> sent_;
};

grpc::ServerBidiReactor<ServerReflectionRequest, ServerReflectionResponse>* ReflectionService::ServerReflectionInfo(
    grpc::CallbackServerContext* call) {
  return new Reactor(*this, call);
}

}  // namespace crossreg::server
