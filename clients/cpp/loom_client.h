// LoomClient: a thin, typed client for loom.v1.Inference, loom.v1.Admin and
// grpc.health.v1.Health over one channel. Every call returns absl::Status(Or) mapped 1:1
// from the gRPC status (message kept). Thread-safe: one client may be shared by threads.
//
//   auto client = LoomClient::Create("127.0.0.1:50051", {});
//   v1::GenerateRequest req; req.set_text("Hello"); req.set_max_tokens(16);
//   absl::Status s = (*client)->Generate(req, [](const v1::GenerateResponse& r) {
//     std::cout << r.text(); return true; });
#ifndef LOOM_CLIENTS_CPP_LOOM_CLIENT_H_
#define LOOM_CLIENTS_CPP_LOOM_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/support/sync_stream.h"
#include "proto/grpc/health/v1/health.grpc.pb.h"
#include "proto/loom/v1/admin.grpc.pb.h"
#include "proto/loom/v1/inference.grpc.pb.h"

namespace loom {

struct ClientOptions {
  // Bearer token sent as `authorization: Bearer <token>` with every call ("" = none).
  std::string token;
  // TLS: enabled when `tls` is true or any file below is set. PEM files; an empty
  // tls_ca_file uses the system roots. Client cert + key (both or neither) enable mTLS.
  bool tls = false;
  std::string tls_ca_file;
  std::string tls_cert_file;
  std::string tls_key_file;
  // Overrides the name checked against the server certificate ("" = from the target).
  std::string tls_server_name;
  // Deadline of each unary call (Tokenize, ListModels, admin calls, HealthCheck).
  absl::Duration deadline = absl::Seconds(30);
  // Deadline of a whole Generate stream.
  absl::Duration generate_deadline = absl::InfiniteDuration();
};

// What a Generate stream adds up to.
struct GenerateResult {
  std::string text;
  std::vector<int32_t> token_ids;
  std::vector<v1::TokenLogprob> logprobs;
  v1::FinishReason finish_reason = v1::FINISH_REASON_UNSPECIFIED;
  v1::Usage usage;
};

// Pull-style Generate stream. Next() blocks for the next message; false at the end,
// after which Finish() gives the call's status. Cancel() may be called from any thread.
class GenerateStream {
 public:
  GenerateStream(std::unique_ptr<grpc::ClientContext> ctx,
                 std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader);
  ~GenerateStream();  // cancels the call if it was not finished
  bool Next(v1::GenerateResponse* message);
  absl::Status Finish();
  void Cancel();

 private:
  std::unique_ptr<grpc::ClientContext> ctx_;
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader_;
  bool finished_ = false;
  absl::Status status_;
};

class LoomClient {
 public:
  // Returning false from a message callback cancels the call (it then ends CANCELLED).
  using MessageCallback = std::function<bool(const v1::GenerateResponse&)>;
  using DoneCallback = std::function<void(absl::Status)>;

  // Connects lazily (no I/O here). InvalidArgument for an empty target or half a client
  // key pair; NotFound / PermissionDenied when a TLS file cannot be read.
  static absl::StatusOr<std::unique_ptr<LoomClient>> Create(const std::string& target,
                                                            const ClientOptions& options);
  // Over an existing channel (tests, in-process servers). TLS fields are ignored.
  static std::unique_ptr<LoomClient> FromChannel(std::shared_ptr<grpc::Channel> channel,
                                                 const ClientOptions& options);

  // Blocking stream: `on_message` runs on the calling thread for each message; returns
  // the call's status (OK only after the final message).
  absl::Status Generate(const v1::GenerateRequest& request, const MessageCallback& on_message);
  // Pull-style stream.
  absl::StatusOr<std::unique_ptr<GenerateStream>> StartGenerate(
      const v1::GenerateRequest& request);
  // Collects the whole stream.
  absl::StatusOr<GenerateResult> GenerateAll(const v1::GenerateRequest& request);
  // Non-blocking (gRPC callback API, no thread per call): `on_message` for each message,
  // then `on_done` exactly once, both on gRPC's callback threads (must not block long).
  // `on_message` and `on_done` must stay valid until `on_done` has run.
  void GenerateAsync(const v1::GenerateRequest& request, MessageCallback on_message,
                     DoneCallback on_done);

  absl::StatusOr<v1::TokenizeResponse> Tokenize(const v1::TokenizeRequest& request);
  absl::StatusOr<std::vector<int32_t>> TokenizeText(const std::string& text);
  absl::StatusOr<v1::ListModelsResponse> ListModels();

  absl::StatusOr<v1::AdapterInfo> LoadAdapter(const std::string& id, const std::string& source,
                                              bool pin);
  absl::StatusOr<v1::UnloadAdapterResponse> UnloadAdapter(const std::string& id);
  absl::StatusOr<v1::ListAdaptersResponse> ListAdapters();
  absl::StatusOr<v1::GetStatusResponse> GetStatus();

  // grpc.health.v1.Health/Check for `service` ("" = whole server).
  absl::StatusOr<grpc::health::v1::HealthCheckResponse::ServingStatus> HealthCheck(
      const std::string& service = "");

  // Waits until the channel is connected; false on timeout.
  bool WaitForConnected(absl::Duration timeout);

  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

 private:
  LoomClient(std::shared_ptr<grpc::Channel> channel, const ClientOptions& options);
  // Fresh context with the token and `deadline` (infinite = none).
  std::unique_ptr<grpc::ClientContext> NewContext(absl::Duration deadline) const;

  std::shared_ptr<grpc::Channel> channel_;
  ClientOptions options_;
  std::unique_ptr<v1::Inference::Stub> inference_;
  std::unique_ptr<v1::Admin::Stub> admin_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
};

// Reads a whole file (TLS PEMs, token files). NotFound / PermissionDenied / Internal.
absl::StatusOr<std::string> ReadFileToString(const std::string& path);
// A token file's contents with surrounding whitespace removed; InvalidArgument if empty.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

}  // namespace loom

#endif  // LOOM_CLIENTS_CPP_LOOM_CLIENT_H_
