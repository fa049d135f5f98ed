// loomctl's logic without main(): argument parsing, table/JSON rendering, and running a
// parsed command against a LoomClient. Exit codes: 0 ok, 1 server/IO error, 2 usage.
#ifndef LOOM_CLIENTS_LOOMCTL_LOOMCTL_LIB_H_
#define LOOM_CLIENTS_LOOMCTL_LOOMCTL_LIB_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "clients/cpp/loom_client.h"
#include "nlohmann/json.hpp"

namespace loom::loomctl {

enum class Command { kHelp, kLoad, kUnload, kList, kStatus, kDrain, kUndrain };

struct Args {
  std::string addr = "127.0.0.1:50052";
  std::string token_file;  // "" = no token (or $LOOM_ADMIN_TOKEN when set)
  bool json = false;
  std::string tls_ca, tls_cert, tls_key, tls_server_name;
  bool tls = false;
  absl::Duration timeout = absl::Seconds(60);
  Command command = Command::kHelp;
  std::string id;      // load, unload; the worker name for drain, undrain
  std::string source;  // load
  bool pin = false;    // load
};

// Parses argv without the program name. Flags may come before or after the command, as
// "--flag value" or "--flag=value". InvalidArgument with a one-line reason on any
// unknown flag, missing value, missing/extra operand or unknown command.
absl::StatusOr<Args> ParseArgs(const std::vector<std::string>& argv);
std::string UsageText();

// "0 B", "512 B", "1.5 KiB", "12.0 MiB", ...
std::string FormatBytes(uint64_t bytes);
// Compact age: "-" for never (unset), "5s ago", "3m ago", "2h ago", "4d ago".
std::string FormatAge(const google::protobuf::Timestamp& t, absl::Time now);
// "READY", "LOADING", ... (the enum name without its prefix).
std::string StateName(v1::AdapterState state);

// Aligned columns: each column as wide as its widest cell, two spaces between columns,
// no trailing spaces. Rows shorter than the header are padded with empty cells.
std::string RenderTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows);

std::string FormatAdapterTable(const v1::ListAdaptersResponse& list, absl::Time now);
std::string FormatStatus(const v1::GetStatusResponse& status);
std::string FormatLoaded(const v1::AdapterInfo& adapter);

nlohmann::json AdapterToJson(const v1::AdapterInfo& adapter);
nlohmann::json StatusToJson(const v1::GetStatusResponse& status);

// "loomctl: NOT_FOUND: no adapter 'x'".
std::string ErrorLine(const absl::Status& status);

// loom.v1.Admin/DrainWorker over `client`'s channel with the token of `options`
// (a router only; `undrain` reverses it).
absl::StatusOr<v1::DrainWorkerResponse> DrainWorker(LoomClient& client,
                                                    const ClientOptions& options,
                                                    const std::string& worker, bool undrain,
                                                    absl::Duration timeout);

// Runs a parsed command; writes results to `out`, errors (ErrorLine) to `err`.
int Run(const Args& args, LoomClient& client, std::ostream& out, std::ostream& err);

// Builds ClientOptions from args (reads the token file). Errors are already prefixed
// with what was being read.
absl::StatusOr<ClientOptions> MakeClientOptions(const Args& args);

}  // namespace loom::loomctl

#endif  // LOOM_CLIENTS_LOOMCTL_LOOMCTL_LIB_H_
