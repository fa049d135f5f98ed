#include "clients/cpp/loom_client.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"
#include "clients/cpp/grpc_status.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "grpcpp/support/client_callback.h"

namespace loom {

absl::StatusOr<std::string> ReadFileToString(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int err = errno;
    const std::string what = absl::StrCat("cannot read ", path, ": ", std::strerror(err));
    if (err == ENOENT) return absl::NotFoundError(what);
    if (err == EACCES) return absl::PermissionDeniedError(what);
    return absl::InternalError(what);
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return absl::InternalError(absl::StrCat("error reading ", path));
  return ss.str();
}

absl::StatusOr<std::string> ReadTokenFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  std::string token(absl::StripAsciiWhitespace(*text));
  if (token.empty()) return absl::InvalidArgumentError(absl::StrCat("token file ", path, " is empty"));
  return token;
}

// ---- GenerateStream ----

GenerateStream::GenerateStream(std::unique_ptr<grpc::ClientContext> ctx,
                               std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader)
    : ctx_(std::move(ctx)), reader_(std::move(reader)) {}

GenerateStream::~GenerateStream() {
  if (!finished_) {
    ctx_->TryCancel();
    Finish().IgnoreError();
  }
}

bool GenerateStream::Next(v1::GenerateResponse* message) {
  if (finished_) return false;
  return reader_->Read(message);
}

absl::Status GenerateStream::Finish() {
  if (finished_) return status_;
  // Drain unread messages so Finish() does not wait forever on a live stream.
  v1::GenerateResponse scratch;
  while (reader_->Read(&scratch)) {
  }
  status_ = FromGrpcStatus(reader_->Finish());
  finished_ = true;
  return status_;
}

void GenerateStream::Cancel() { ctx_->TryCancel(); }

// ---- LoomClient ----

absl::StatusOr<std::unique_ptr<LoomClient>> LoomClient::Create(const std::string& target,
                                                               const ClientOptions& options) {
  if (target.empty()) return absl::InvalidArgumentError("empty server address");
  const bool tls = options.tls || !options.tls_ca_file.empty() ||
                   !options.tls_cert_file.empty() || !options.tls_key_file.empty();
  std::shared_ptr<grpc::ChannelCredentials> creds;
  grpc::ChannelArguments args;
  if (tls) {
    if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
      return absl::InvalidArgumentError(
          "mTLS needs both a client certificate and its key (tls_cert_file, tls_key_file)");
    }
    grpc::SslCredentialsOptions ssl;
    if (!options.tls_ca_file.empty()) {
      absl::StatusOr<std::string> ca = ReadFileToString(options.tls_ca_file);
      if (!ca.ok()) return ca.status();
      ssl.pem_root_certs = *std::move(ca);
    }
    if (!options.tls_cert_file.empty()) {
      absl::StatusOr<std::string> cert = ReadFileToString(options.tls_cert_file);
      if (!cert.ok()) return cert.status();
      absl::StatusOr<std::string> key = ReadFileToString(options.tls_key_file);
      if (!key.ok()) return key.status();
      ssl.pem_cert_chain = *std::move(cert);
      ssl.pem_private_key = *std::move(key);
    }
    creds = grpc::SslCredentials(ssl);
    if (!options.tls_server_name.empty()) {
      args.SetSslTargetNameOverride(options.tls_server_name);
    }
  } else {
    creds = grpc::InsecureChannelCredentials();
  }
  // Generated text can be long; do not cap received messages at the 4 MiB default.
  args.SetMaxReceiveMessageSize(-1);
  auto channel = grpc::CreateCustomChannel(target, creds, args);
  if (channel == nullptr) return absl::InternalError("could not create a gRPC channel");
  return std::unique_ptr<LoomClient>(new LoomClient(std::move(channel), options));
}

std::unique_ptr<LoomClient> LoomClient::FromChannel(std::shared_ptr<grpc::Channel> channel,
                                                    const ClientOptions& options) {
  return std::unique_ptr<LoomClient>(new LoomClient(std::move(channel), options));
}

LoomClient::LoomClient(std::shared_ptr<grpc::Channel> channel, const ClientOptions& options)
    : channel_(std::move(channel)),
      options_(options),
      inference_(v1::Inference::NewStub(channel_)),
      admin_(v1::Admin::NewStub(channel_)),
      health_(grpc::health::v1::Health::NewStub(channel_)) {}

std::unique_ptr<grpc::ClientContext> LoomClient::NewContext(absl::Duration deadline) const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  if (!options_.token.empty()) {
    ctx->AddMetadata("authorization", absl::StrCat("Bearer ", options_.token));
  }
  if (deadline != absl::InfiniteDuration()) {
    ctx->set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  }
  return ctx;
}

absl::Status LoomClient::Generate(const v1::GenerateRequest& request,
                                  const MessageCallback& on_message) {
  auto ctx = NewContext(options_.generate_deadline);
  auto reader = inference_->Generate(ctx.get(), request);
  v1::GenerateResponse message;
  while (reader->Read(&message)) {
    if (!on_message(message)) {
      ctx->TryCancel();
      while (reader->Read(&message)) {
      }
      break;
    }
  }
  return FromGrpcStatus(reader->Finish());
}

absl::StatusOr<std::unique_ptr<GenerateStream>> LoomClient::StartGenerate(
    const v1::GenerateRequest& request) {
  auto ctx = NewContext(options_.generate_deadline);
  auto reader = inference_->Generate(ctx.get(), request);
  return std::make_unique<GenerateStream>(std::move(ctx), std::move(reader));
}

absl::StatusOr<GenerateResult> LoomClient::GenerateAll(const v1::GenerateRequest& request) {
  GenerateResult result;
  absl::Status status = Generate(request, [&result](const v1::GenerateResponse& m) {
    result.text += m.text();
    result.token_ids.insert(result.token_ids.end(), m.token_ids().begin(), m.token_ids().end());
    result.logprobs.insert(result.logprobs.end(), m.logprobs().begin(), m.logprobs().end());
    if (m.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
      result.finish_reason = m.finish_reason();
      result.usage = m.usage();
    }
    return true;
  });
  if (!status.ok()) return status;
  if (result.finish_reason == v1::FINISH_REASON_UNSPECIFIED) {
    return absl::DataLossError("Generate stream ended without a final message");
  }
  return result;
}

namespace {

// One asynchronous Generate call; deletes itself after OnDone.
class GenerateReactor : public grpc::ClientReadReactor<v1::GenerateResponse> {
 public:
  GenerateReactor(std::unique_ptr<grpc::ClientContext> ctx, v1::GenerateRequest request,
                  LoomClient::MessageCallback on_message, LoomClient::DoneCallback on_done)
      : ctx_(std::move(ctx)),
        request_(std::move(request)),
        on_message_(std::move(on_message)),
        on_done_(std::move(on_done)) {}

  void Start(v1::Inference::Stub* stub) {
    stub->async()->Generate(ctx_.get(), &request_, this);
    StartRead(&message_);
    StartCall();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // stream over; OnDone follows
    if (!cancelled_ && !on_message_(message_)) {
      cancelled_ = true;
      ctx_->TryCancel();
    }
    StartRead(&message_);
  }

  void OnDone(const grpc::Status& status) override {
    on_done_(FromGrpcStatus(status));
    delete this;
  }

 private:
  std::unique_ptr<grpc::ClientContext> ctx_;
  v1::GenerateRequest request_;
  v1::GenerateResponse message_;
  LoomClient::MessageCallback on_message_;
  LoomClient::DoneCallback on_done_;
  bool cancelled_ = false;
};

}  // namespace

void LoomClient::GenerateAsync(const v1::GenerateRequest& request, MessageCallback on_message,
                               DoneCallback on_done) {
  auto* reactor = new GenerateReactor(NewContext(options_.generate_deadline), request,
                                      std::move(on_message), std::move(on_done));
  reactor->Start(inference_.get());
}

absl::StatusOr<v1::TokenizeResponse> LoomClient::Tokenize(const v1::TokenizeRequest& request) {
  auto ctx = NewContext(options_.deadline);
  v1::TokenizeResponse response;
  absl::Status s = FromGrpcStatus(inference_->Tokenize(ctx.get(), request, &response));
  if (!s.ok()) return s;
  return response;
}

absl::StatusOr<std::vector<int32_t>> LoomClient::TokenizeText(const std::string& text) {
  v1::TokenizeRequest request;
  request.set_text(text);
  absl::StatusOr<v1::TokenizeResponse> response = Tokenize(request);
  if (!response.ok()) return response.status();
  return std::vector<int32_t>(response->token_ids().begin(), response->token_ids().end());
}

absl::StatusOr<v1::ListModelsResponse> LoomClient::ListModels() {
  auto ctx = NewContext(options_.deadline);
  v1::ListModelsResponse response;
  absl::Status s =
      FromGrpcStatus(inference_->ListModels(ctx.get(), v1::ListModelsRequest(), &response));
  if (!s.ok()) return s;
  return response;
}

absl::StatusOr<v1::AdapterInfo> LoomClient::LoadAdapter(const std::string& id,
                                                        const std::string& source, bool pin) {
  auto ctx = NewContext(options_.deadline);
  v1::LoadAdapterRequest request;
  request.set_id(id);
  request.set_source(source);
  request.set_pin(pin);
  v1::LoadAdapterResponse response;
  absl::Status s = FromGrpcStatus(admin_->LoadAdapter(ctx.get(), request, &response));
  if (!s.ok()) return s;
  return response.adapter();
}

absl::StatusOr<v1::UnloadAdapterResponse> LoomClient::UnloadAdapter(const std::string& id) {
  auto ctx = NewContext(options_.deadline);
  v1::UnloadAdapterRequest request;
  request.set_id(id);
  v1::UnloadAdapterResponse response;
  absl::Status s = FromGrpcStatus(admin_->UnloadAdapter(ctx.get(), request, &response));
  if (!s.ok()) return s;
  return response;
}

absl::StatusOr<v1::ListAdaptersResponse> LoomClient::ListAdapters() {
  auto ctx = NewContext(options_.deadline);
  v1::ListAdaptersResponse response;
  absl::Status s =
      FromGrpcStatus(admin_->ListAdapters(ctx.get(), v1::ListAdaptersRequest(), &response));
  if (!s.ok()) return s;
  return response;
}

absl::StatusOr<v1::GetStatusResponse> LoomClient::GetStatus() {
  auto ctx = NewContext(options_.deadline);
  v1::GetStatusResponse response;
  absl::Status s =
      FromGrpcStatus(admin_->GetStatus(ctx.get(), v1::GetStatusRequest(), &response));
  if (!s.ok()) return s;
  return response;
}

absl::StatusOr<grpc::health::v1::HealthCheckResponse::ServingStatus> LoomClient::HealthCheck(
    const std::string& service) {
  auto ctx = NewContext(options_.deadline);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  absl::Status s = FromGrpcStatus(health_->Check(ctx.get(), request, &response));
  if (!s.ok()) return s;
  return response.status();
}

bool LoomClient::WaitForConnected(absl::Duration timeout) {
  return channel_->WaitForConnected(absl::ToChronoTime(absl::Now() + timeout));
}

}  // namespace loom
