// Test harness for end-to-end tests: starts the real `loomd` binary (a data dependency,
// found in the runfiles) on free loopback ports, waits until its gRPC health service says
// SERVING on both listeners, and stops it with SIGTERM (the exit status is returned so
// tests can require a clean exit 0). Also: running other binaries (loomctl,
// make_test_adapter) and a minimal HTTP GET for /metrics and /healthz.
#ifndef LOOM_TESTS_E2E_LOOMD_PROCESS_H_
#define LOOM_TESTS_E2E_LOOMD_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "clients/cpp/loom_client.h"

namespace loom::e2e {

// Absolute path of a runfile given by its workspace-relative path ("server/loomd").
std::string Runfile(const std::string& path);
// A TCP port on 127.0.0.1 that was free a moment ago.
int FreePort();
// A fresh directory under TEST_TMPDIR.
std::string TempDir(const std::string& name);

struct CommandResult {
  int exit_code = -1;  // -1 when killed by a signal
  std::string output;  // stdout and stderr together
};
// Runs argv[0] with argv (no shell), waits for it, and returns its exit code and output.
CommandResult RunCommand(const std::vector<std::string>& argv,
                         const std::vector<std::string>& extra_env = {});

// GET http://127.0.0.1:port/path; the HTTP status code and body.
struct HttpResponse {
  int status = 0;
  std::string body;
};
absl::StatusOr<HttpResponse> HttpGet(int port, const std::string& path);
// POST http://127.0.0.1:port/path with a JSON body (Connection: close, no chunking).
absl::StatusOr<HttpResponse> HttpPostJson(int port, const std::string& path,
                                          const std::string& json);
absl::StatusOr<HttpResponse> HttpCall(int port, const std::string& method,
                                      const std::string& path, const std::string& body);
// The value of an unlabelled Prometheus sample `name` in an exposition; NotFound if absent.
absl::StatusOr<double> MetricValue(const std::string& exposition, const std::string& name);

// Writes a synthetic PEFT adapter (make_test_adapter) for the default model into `dir`;
// with `gguf_path` non-empty, also the GGUF-LoRA file. Returns make_test_adapter's status.
absl::Status MakeTestAdapter(const std::string& dir, int rank, uint64_t seed,
                             const std::string& gguf_path = "");

class LoomdProcess {
 public:
  // Starts loomd with `args` plus --port/--admin_port/--metrics_port/--http_port on free
  // ports and --threads=2 (unless given), and waits up to `timeout` for health SERVING.
  static absl::StatusOr<std::unique_ptr<LoomdProcess>> Start(
      std::vector<std::string> args, absl::Duration timeout = absl::Seconds(120));
  ~LoomdProcess();  // SIGKILL if still running

  // Sends SIGTERM and waits up to `timeout`; the exit code (-1: killed by a signal or
  // timed out, then SIGKILLed).
  int Stop(absl::Duration timeout = absl::Seconds(60));
  // Sends `sig` without waiting.
  void Signal(int sig);
  // Waits for exit without signalling; the exit code, or -1 on timeout or a signal.
  int Wait(absl::Duration timeout);

  int port() const { return port_; }
  int admin_port() const { return admin_port_; }
  int metrics_port() const { return metrics_port_; }
  int http_port() const { return http_port_; }  // the OpenAI HTTP API (single, router)
  std::string target() const;        // "127.0.0.1:<port>"
  std::string admin_target() const;  // "127.0.0.1:<admin_port>"
  // The daemon's log so far (stderr and stdout).
  std::string Log() const;
  // Clients of both listeners (`token` for the admin one).
  std::unique_ptr<LoomClient> Client() const;
  std::unique_ptr<LoomClient> AdminClient(const std::string& token = "") const;

 private:
  LoomdProcess() = default;

  pid_t pid_ = -1;
  int port_ = 0, admin_port_ = 0, metrics_port_ = 0, http_port_ = 0;
  std::string log_path_;
  bool exited_ = false;
  int exit_code_ = -1;
};

}  // namespace loom::e2e

#endif  // LOOM_TESTS_E2E_LOOMD_PROCESS_H_
