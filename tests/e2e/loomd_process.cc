#include "tests/e2e/loomd_process.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "models/default_model.h"

extern char** environ;

namespace loom::e2e {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::string(v) : std::string();
}

std::vector<char*> CStrings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (std::string& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// exec in a child with stdout+stderr on `out_fd`; never returns in the child.
pid_t Spawn(std::vector<std::string> argv, std::vector<std::string> env, int out_fd) {
  std::vector<char*> cargv = CStrings(argv);
  std::vector<char*> cenv = CStrings(env);
  const pid_t pid = fork();
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    dup2(out_fd, 1);
    dup2(out_fd, 2);
    execve(cargv[0], cargv.data(), cenv.data());
    std::fprintf(stderr, "exec %s failed: %s\n", cargv[0], std::strerror(errno));
    _exit(127);
  }
  return pid;
}

std::vector<std::string> Environment(const std::vector<std::string>& extra) {
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
  env.insert(env.end(), extra.begin(), extra.end());
  return env;
}

int ExitCodeOf(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : -1; }

}  // namespace

std::string Runfile(const std::string& path) {
  std::string ws = Env("TEST_WORKSPACE");
  if (ws.empty()) ws = "loom";
  return absl::StrCat(Env("TEST_SRCDIR"), "/", ws, "/", path);
}

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  socklen_t len = sizeof(addr);
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return ntohs(addr.sin_port);
}

std::string TempDir(const std::string& name) {
  const std::string dir = absl::StrCat(Env("TEST_TMPDIR"), "/", name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

CommandResult RunCommand(const std::vector<std::string>& argv,
                         const std::vector<std::string>& extra_env) {
  int fds[2];
  CommandResult r;
  if (pipe(fds) != 0) return r;
  const pid_t pid = Spawn(argv, Environment(extra_env), fds[1]);
  close(fds[1]);
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;) r.output.append(buf, n);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = ExitCodeOf(status);
  return r;
}

absl::StatusOr<HttpResponse> HttpGet(int port, const std::string& path) {
  return HttpCall(port, "GET", path, "");
}

absl::StatusOr<HttpResponse> HttpPostJson(int port, const std::string& path,
                                          const std::string& json) {
  return HttpCall(port, "POST", path, json);
}

absl::StatusOr<HttpResponse> HttpCall(int port, const std::string& method,
                                      const std::string& path, const std::string& body) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return absl::UnavailableError(absl::StrFormat("cannot connect to port %d", port));
  }
  std::string req = absl::StrCat(method, " ", path,
                                 " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
  if (!body.empty()) {
    absl::StrAppend(&req, "Content-Type: application/json\r\nContent-Length: ", body.size(),
                    "\r\n");
  }
  absl::StrAppend(&req, "\r\n", body);
  if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return absl::UnavailableError("write failed");
  }
  std::string raw;
  char buf[8192];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) raw.append(buf, n);
  close(fd);
  HttpResponse r;
  const size_t sp = raw.find(' ');
  const size_t head_end = raw.find("\r\n\r\n");
  if (sp == std::string::npos || head_end == std::string::npos ||
      !absl::SimpleAtoi(raw.substr(sp + 1, 3), &r.status)) {
    return absl::DataLossError(absl::StrCat("bad HTTP response: ", raw.substr(0, 200)));
  }
  r.body = raw.substr(head_end + 4);
  return r;
}

absl::StatusOr<double> MetricValue(const std::string& exposition, const std::string& name) {
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (!absl::StartsWith(line, name + " ")) continue;
    double v = 0;
    if (absl::SimpleAtod(line.substr(name.size() + 1), &v)) return v;
  }
  return absl::NotFoundError(absl::StrCat("metric ", name, " not in the exposition"));
}

absl::Status MakeTestAdapter(const std::string& dir, int rank, uint64_t seed,
                             const std::string& gguf_path) {
  std::vector<std::string> argv = {Runfile("models/lora/make_test_adapter"),
                                   "--base=" + DefaultModelPath(),
                                   "--out=" + dir,
                                   absl::StrCat("--rank=", rank),
                                   absl::StrCat("--alpha=", 2 * rank),
                                   absl::StrCat("--seed=", seed),
                                   "--dtype=bf16"};
  if (!gguf_path.empty()) argv.push_back("--gguf_out=" + gguf_path);
  CommandResult r = RunCommand(argv);
  if (r.exit_code != 0) {
    return absl::InternalError(absl::StrCat("make_test_adapter failed: ", r.output));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<LoomdProcess>> LoomdProcess::Start(std::vector<std::string> args,
                                                                  absl::Duration timeout) {
  std::unique_ptr<LoomdProcess> p(new LoomdProcess());
  p->port_ = FreePort();
  p->admin_port_ = FreePort();
  p->metrics_port_ = FreePort();
  p->http_port_ = FreePort();
  std::vector<std::string> argv = {Runfile("server/loomd"),
                                   absl::StrCat("--port=", p->port_),
                                   absl::StrCat("--admin_port=", p->admin_port_),
                                   absl::StrCat("--metrics_port=", p->metrics_port_),
                                   absl::StrCat("--http_port=", p->http_port_)};
  bool has_threads = false;
  for (const std::string& a : args) has_threads |= absl::StartsWith(a, "--threads");
  if (!has_threads) argv.push_back("--threads=2");
  argv.insert(argv.end(), args.begin(), args.end());
  std::string dir = Env("TEST_UNDECLARED_OUTPUTS_DIR");
  if (dir.empty()) dir = Env("TEST_TMPDIR");
  p->log_path_ = absl::StrFormat("%s/loomd-%d.log", dir, p->port_);
  const int log_fd = open(p->log_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (log_fd < 0) return absl::InternalError("cannot create " + p->log_path_);
  p->pid_ = Spawn(argv, Environment({}), log_fd);
  close(log_fd);

  std::unique_ptr<LoomClient> client = p->Client();
  std::unique_ptr<LoomClient> admin = p->AdminClient();
  const absl::Time end = absl::Now() + timeout;
  while (absl::Now() < end) {
    int status = 0;
    if (waitpid(p->pid_, &status, WNOHANG) == p->pid_) {
      p->exited_ = true;
      p->exit_code_ = ExitCodeOf(status);
      return absl::UnavailableError(absl::StrFormat(
          "loomd exited with %d before serving; log:\n%s", p->exit_code_, p->Log()));
    }
    auto a = client->HealthCheck("");
    auto b = admin->HealthCheck("");
    if (a.ok() && b.ok() && *a == grpc::health::v1::HealthCheckResponse::SERVING &&
        *b == grpc::health::v1::HealthCheckResponse::SERVING) {
      return p;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  return absl::DeadlineExceededError("loomd did not become SERVING; log:\n" + p->Log());
}

LoomdProcess::~LoomdProcess() {
  if (pid_ > 0 && !exited_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
  }
}

void LoomdProcess::Signal(int sig) {
  if (pid_ > 0 && !exited_) kill(pid_, sig);
}

int LoomdProcess::Wait(absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  while (!exited_) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      exited_ = true;
      exit_code_ = ExitCodeOf(status);
      break;
    }
    if (absl::Now() > end) return -1;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return exit_code_;
}

int LoomdProcess::Stop(absl::Duration timeout) {
  Signal(SIGTERM);
  const int code = Wait(timeout);
  if (!exited_) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    exited_ = true;
    exit_code_ = -1;
  }
  return code;
}

std::string LoomdProcess::target() const { return absl::StrCat("127.0.0.1:", port_); }
std::string LoomdProcess::admin_target() const {
  return absl::StrCat("127.0.0.1:", admin_port_);
}

std::string LoomdProcess::Log() const {
  std::ifstream in(log_path_);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::unique_ptr<LoomClient> LoomdProcess::Client() const {
  return *LoomClient::Create(target(), ClientOptions());
}

std::unique_ptr<LoomClient> LoomdProcess::AdminClient(const std::string& token) const {
  ClientOptions o;
  o.token = token;
  return *LoomClient::Create(admin_target(), o);
}

}  // namespace loom::e2e
