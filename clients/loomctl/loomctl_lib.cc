#include "clients/loomctl/loomctl_lib.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace loom::loomctl {
namespace {

bool NeedsValue(const std::string& flag) {
  return flag == "--addr" || flag == "--token-file" || flag == "--tls-ca" ||
         flag == "--tls-cert" || flag == "--tls-key" || flag == "--tls-server-name" ||
         flag == "--timeout";
}

absl::Time ToTime(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

bool HasTime(const v1::AdapterInfo& a) {
  return a.has_last_use() && (a.last_use().seconds() != 0 || a.last_use().nanos() != 0);
}

}  // namespace

std::string UsageText() {
  return "usage: loomctl [flags] <command>\n"
         "commands:\n"
         "  load ID PATH [--pin]   load (or replace) adapter ID from PATH (PEFT dir or GGUF LoRA)\n"
         "  unload ID              unload adapter ID (running requests drain first)\n"
         "  list                   list adapters\n"
         "  status                 workers, queues, KV pages, adapter memory\n"
         "  drain WORKER           (router) move WORKER's requests off it, place nothing there\n"
         "  undrain WORKER         (router) make a drained WORKER placeable again\n"
         "flags:\n"
         "  --addr HOST:PORT       admin endpoint (default 127.0.0.1:50052)\n"
         "  --token-file FILE      bearer token file (default: $LOOM_ADMIN_TOKEN if set)\n"
         "  --json                 print JSON instead of tables\n"
         "  --timeout SECONDS      per-call deadline (default 60)\n"
         "  --tls                  use TLS with the system roots\n"
         "  --tls-ca FILE          CA bundle (PEM); implies --tls\n"
         "  --tls-cert FILE --tls-key FILE   client certificate for mTLS\n"
         "  --tls-server-name NAME expected server certificate name\n";
}

absl::StatusOr<Args> ParseArgs(const std::vector<std::string>& argv) {
  Args args;
  std::vector<std::string> operands;
  for (size_t i = 0; i < argv.size(); ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      operands.insert(operands.end(), argv.begin() + i + 1, argv.end());
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      operands.push_back(arg);
      continue;
    }
    std::string value;
    bool has_value = false;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg = arg.substr(0, eq);
      has_value = true;
    }
    if (arg == "-h" || arg == "--help") {
      args.command = Command::kHelp;
      return args;
    }
    if (NeedsValue(arg)) {
      if (!has_value) {
        if (i + 1 >= argv.size()) return absl::InvalidArgumentError(absl::StrCat(arg, " needs a value"));
        value = argv[++i];
      }
      if (arg == "--addr") {
        if (value.empty()) return absl::InvalidArgumentError("--addr is empty");
        args.addr = value;
      } else if (arg == "--token-file") {
        args.token_file = value;
      } else if (arg == "--tls-ca") {
        args.tls_ca = value;
      } else if (arg == "--tls-cert") {
        args.tls_cert = value;
      } else if (arg == "--tls-key") {
        args.tls_key = value;
      } else if (arg == "--tls-server-name") {
        args.tls_server_name = value;
      } else if (arg == "--timeout") {
        double seconds = 0;
        if (!absl::SimpleAtod(value, &seconds) || !(seconds > 0) || seconds > 1e6) {
          return absl::InvalidArgumentError(absl::StrCat("--timeout: bad value '", value, "'"));
        }
        args.timeout = absl::Seconds(seconds);
      }
      continue;
    }
    if (has_value) return absl::InvalidArgumentError(absl::StrCat(arg, " takes no value"));
    if (arg == "--json") {
      args.json = true;
    } else if (arg == "--pin") {
      args.pin = true;
    } else if (arg == "--tls") {
      args.tls = true;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag ", arg));
    }
  }
  if (operands.empty()) return absl::InvalidArgumentError("missing command");
  const std::string& cmd = operands[0];
  const size_t n = operands.size() - 1;
  auto want = [&](size_t count, const char* shape) -> absl::Status {
    if (n != count) {
      return absl::InvalidArgumentError(absl::StrCat(cmd, ": expected ", shape, ", got ", n,
                                                     n == 1 ? " argument" : " arguments"));
    }
    return absl::OkStatus();
  };
  if (cmd == "load") {
    if (absl::Status s = want(2, "ID PATH"); !s.ok()) return s;
    args.command = Command::kLoad;
    args.id = operands[1];
    args.source = operands[2];
  } else if (cmd == "unload") {
    if (absl::Status s = want(1, "ID"); !s.ok()) return s;
    args.command = Command::kUnload;
    args.id = operands[1];
  } else if (cmd == "list") {
    if (absl::Status s = want(0, "no arguments"); !s.ok()) return s;
    args.command = Command::kList;
  } else if (cmd == "status") {
    if (absl::Status s = want(0, "no arguments"); !s.ok()) return s;
    args.command = Command::kStatus;
  } else if (cmd == "drain" || cmd == "undrain") {
    if (absl::Status s = want(1, "WORKER"); !s.ok()) return s;
    args.command = cmd == "drain" ? Command::kDrain : Command::kUndrain;
    args.id = operands[1];
    if (args.id.empty()) return absl::InvalidArgumentError("WORKER is empty");
  } else if (cmd == "help") {
    args.command = Command::kHelp;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("unknown command '", cmd, "'"));
  }
  if (args.pin && args.command != Command::kLoad) {
    return absl::InvalidArgumentError("--pin only applies to load");
  }
  if (args.id.empty() && (args.command == Command::kLoad || args.command == Command::kUnload)) {
    return absl::InvalidArgumentError("adapter ID is empty");
  }
  if (args.command == Command::kLoad && args.source.empty()) {
    return absl::InvalidArgumentError("adapter PATH is empty");
  }
  return args;
}

std::string FormatBytes(uint64_t bytes) {
  static const char* kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return absl::StrCat(bytes, " B");
  double v = static_cast<double>(bytes) / 1024.0;
  int u = 0;
  while (v >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  return absl::StrFormat("%.1f %s", v, kUnits[u]);
}

std::string FormatAge(const google::protobuf::Timestamp& t, absl::Time now) {
  if (t.seconds() == 0 && t.nanos() == 0) return "-";
  int64_t s = absl::ToInt64Seconds(now - ToTime(t));
  if (s < 0) s = 0;
  if (s < 60) return absl::StrCat(s, "s ago");
  if (s < 3600) return absl::StrCat(s / 60, "m ago");
  if (s < 86400) return absl::StrCat(s / 3600, "h ago");
  return absl::StrCat(s / 86400, "d ago");
}

std::string StateName(v1::AdapterState state) {
  std::string name = v1::AdapterState_Name(state);
  absl::string_view v = name;
  absl::ConsumePrefix(&v, "ADAPTER_STATE_");
  return v.empty() ? "UNSPECIFIED" : std::string(v);
}

std::string RenderTable(const std::vector<std::string>& header,
                        const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size(), 0);
  for (size_t c = 0; c < header.size(); ++c) width[c] = header[c].size();
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size() && c < width.size(); ++c) {
      width[c] = std::max(width[c], row[c].size());
    }
  }
  std::string out;
  auto emit = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t c = 0; c < header.size(); ++c) {
      const std::string cell = c < row.size() ? row[c] : "";
      if (c > 0) line += "  ";
      line += cell;
      if (c + 1 < header.size()) line.append(width[c] - cell.size(), ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  };
  emit(header);
  for (const auto& row : rows) emit(row);
  return out;
}

std::string FormatAdapterTable(const v1::ListAdaptersResponse& list, absl::Time now) {
  if (list.adapters().empty()) return "no adapters\n";
  std::vector<std::vector<std::string>> rows;
  for (const auto& a : list.adapters()) {
    std::string targets = a.targets().empty() ? "-" : absl::StrJoin(a.targets(), ",");
    rows.push_back({a.id(), StateName(a.state()), absl::StrCat(a.rank()), targets,
                    FormatBytes(a.bytes()), a.pinned() ? "yes" : "no",
                    a.resident() ? "yes" : "no", absl::StrCat(a.active_requests()),
                    absl::StrCat(a.requests_served()), FormatAge(a.last_use(), now),
                    a.source()});
  }
  std::string out = RenderTable({"ID", "STATE", "RANK", "TARGETS", "BYTES", "PINNED",
                                 "RESIDENT", "ACTIVE", "SERVED", "LAST USE", "SOURCE"},
                                rows);
  for (const auto& a : list.adapters()) {
    if (!a.error().empty()) out += absl::StrCat(a.id(), ": ", a.error(), "\n");
  }
  return out;
}

std::string FormatStatus(const v1::GetStatusResponse& s) {
  std::string out;
  const bool router = s.role() == "router";
  const int64_t kv_total = s.kv_pages_used() + s.kv_pages_free();
  const double kv_pct = kv_total > 0 ? 100.0 * s.kv_pages_used() / kv_total : 0.0;
  out += RenderTable(
      {"", ""},
      {{"server", absl::StrCat(s.version().empty() ? "loomd" : "loomd " + s.version(), ", ",
                               s.serving() ? "serving" : "not serving", ", up ",
                               absl::FormatDuration(absl::Seconds(s.uptime_seconds())))},
       {"model", s.base_model().empty() ? "-" : s.base_model()},
       {"requests", absl::StrCat(s.running(), " running, ", s.queued(), " queued")},
       {"kv pages", absl::StrFormat("%d used, %d free (%.1f%% used)", s.kv_pages_used(),
                                    s.kv_pages_free(), kv_pct)},
       {"adapters",
        absl::StrCat(s.adapters_registered(), " registered, ", s.adapters_resident(),
                     " resident, ", FormatBytes(s.adapter_bytes_resident()), " of ",
                     s.adapter_bytes_budget() == 0 ? std::string("unlimited")
                                                   : FormatBytes(s.adapter_bytes_budget()))}});
  // The two-column block has an empty header line; drop it.
  out = out.substr(out.find('\n') + 1);
  if (!s.workers().empty()) {
    std::vector<std::vector<std::string>> rows;
    for (const auto& w : s.workers()) {
      rows.push_back({w.id(), w.backend(), absl::StrCat(w.running()), absl::StrCat(w.queued()),
                      absl::StrCat(w.kv_pages_used()), absl::StrCat(w.kv_pages_free()),
                      absl::StrCat(w.preemptions()), absl::StrCat(w.steps()),
                      absl::StrCat(w.last_batch_sequences(), "/", w.last_batch_tokens()),
                      w.resident_adapters().empty() ? "-"
                                                    : absl::StrJoin(w.resident_adapters(), ",")});
      if (router) {
        rows.back().insert(rows.back().begin() + 1,
                           !w.up() ? "down" : w.draining() ? "draining" : w.idle() ? "idle" : "up");
      }
    }
    out += "\n";
    std::vector<std::string> header = {"WORKER", "BACKEND", "RUNNING", "QUEUED", "KV USED",
                                       "KV FREE", "PREEMPT", "STEPS", "LAST SEQ/TOK",
                                       "ADAPTERS"};
    if (router) header.insert(header.begin() + 1, "STATE");
    out += RenderTable(header, rows);
  }
  if (router) {
    out += absl::StrCat("\nrouter: ", s.migrations(), " migrations, ", s.failovers(),
                        " failovers; idle workers: ",
                        s.idle_workers().empty() ? std::string("-")
                                                 : absl::StrJoin(s.idle_workers(), ","),
                        s.want_more_workers() ? "; wants more workers" : "", "\n");
  }
  return out;
}

std::string FormatLoaded(const v1::AdapterInfo& a) {
  return absl::StrCat("loaded ", a.id(), ": ", StateName(a.state()), ", rank ", a.rank(), ", ",
                      a.targets_size(), a.targets_size() == 1 ? " target, " : " targets, ",
                      FormatBytes(a.bytes()), a.pinned() ? ", pinned" : "", "\n");
}

nlohmann::json AdapterToJson(const v1::AdapterInfo& a) {
  nlohmann::json j;
  j["id"] = a.id();
  j["source"] = a.source();
  j["state"] = StateName(a.state());
  if (!a.error().empty()) j["error"] = a.error();
  j["rank"] = a.rank();
  j["targets"] = std::vector<std::string>(a.targets().begin(), a.targets().end());
  j["bytes"] = a.bytes();
  j["pinned"] = a.pinned();
  j["resident"] = a.resident();
  j["active_requests"] = a.active_requests();
  j["requests_served"] = a.requests_served();
  if (HasTime(a)) {
    j["last_use"] = absl::FormatTime(absl::RFC3339_full, ToTime(a.last_use()), absl::UTCTimeZone());
  } else {
    j["last_use"] = nullptr;
  }
  return j;
}

nlohmann::json StatusToJson(const v1::GetStatusResponse& s) {
  nlohmann::json j;
  j["version"] = s.version();
  j["base_model"] = s.base_model();
  j["uptime_seconds"] = s.uptime_seconds();
  j["serving"] = s.serving();
  j["running"] = s.running();
  j["queued"] = s.queued();
  j["kv_pages_used"] = s.kv_pages_used();
  j["kv_pages_free"] = s.kv_pages_free();
  j["adapters_registered"] = s.adapters_registered();
  j["adapters_resident"] = s.adapters_resident();
  j["adapter_bytes_resident"] = s.adapter_bytes_resident();
  j["adapter_bytes_budget"] = s.adapter_bytes_budget();
  j["workers"] = nlohmann::json::array();
  for (const auto& w : s.workers()) {
    nlohmann::json wj;
    wj["id"] = w.id();
    wj["backend"] = w.backend();
    wj["running"] = w.running();
    wj["queued"] = w.queued();
    wj["kv_pages_used"] = w.kv_pages_used();
    wj["kv_pages_free"] = w.kv_pages_free();
    wj["kv_page_tokens"] = w.kv_page_tokens();
    if (!w.kv_cache_dtype().empty()) wj["kv_cache_dtype"] = w.kv_cache_dtype();
    wj["preemptions"] = w.preemptions();
    wj["steps"] = w.steps();
    wj["last_batch_tokens"] = w.last_batch_tokens();
    wj["last_batch_sequences"] = w.last_batch_sequences();
    wj["resident_adapters"] =
        std::vector<std::string>(w.resident_adapters().begin(), w.resident_adapters().end());
    if (s.role() == "router") {
      wj["up"] = w.up();
      wj["draining"] = w.draining();
      wj["idle"] = w.idle();
      wj["assigned"] = w.assigned();
    }
    j["workers"].push_back(wj);
  }
  if (!s.role().empty()) j["role"] = s.role();
  if (s.role() == "router") {
    j["idle_workers"] =
        std::vector<std::string>(s.idle_workers().begin(), s.idle_workers().end());
    j["want_more_workers"] = s.want_more_workers();
    j["migrations"] = s.migrations();
    j["failovers"] = s.failovers();
  }
  return j;
}

std::string ErrorLine(const absl::Status& status) {
  return absl::StrCat("loomctl: ", absl::StatusCodeToString(status.code()), ": ",
                      status.message());
}

absl::StatusOr<ClientOptions> MakeClientOptions(const Args& args) {
  ClientOptions options;
  options.deadline = args.timeout;
  if (!args.token_file.empty()) {
    absl::StatusOr<std::string> token = ReadTokenFile(args.token_file);
    if (!token.ok()) return token.status();
    options.token = *token;
  } else if (const char* env = std::getenv("LOOM_ADMIN_TOKEN"); env != nullptr && *env) {
    options.token = std::string(absl::StripAsciiWhitespace(env));
  }
  options.tls = args.tls;
  options.tls_ca_file = args.tls_ca;
  options.tls_cert_file = args.tls_cert;
  options.tls_key_file = args.tls_key;
  options.tls_server_name = args.tls_server_name;
  return options;
}

absl::StatusOr<v1::DrainWorkerResponse> DrainWorker(LoomClient& client,
                                                    const ClientOptions& options,
                                                    const std::string& worker, bool undrain,
                                                    absl::Duration timeout) {
  v1::Admin::Stub stub(client.channel());
  grpc::ClientContext ctx;
  if (!options.token.empty()) ctx.AddMetadata("authorization", "Bearer " + options.token);
  if (timeout != absl::InfiniteDuration()) {
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  }
  v1::DrainWorkerRequest req;
  req.set_worker(worker);
  req.set_undrain(undrain);
  v1::DrainWorkerResponse resp;
  const grpc::Status s = stub.DrainWorker(&ctx, req, &resp);
  if (!s.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  }
  return resp;
}

int Run(const Args& args, LoomClient& client, std::ostream& out, std::ostream& err) {
  auto fail = [&err](const absl::Status& s) {
    err << ErrorLine(s) << "\n";
    return 1;
  };
  switch (args.command) {
    case Command::kHelp:
      out << UsageText();
      return 0;
    case Command::kLoad: {
      absl::StatusOr<v1::AdapterInfo> a = client.LoadAdapter(args.id, args.source, args.pin);
      if (!a.ok()) return fail(a.status());
      if (args.json) {
        out << AdapterToJson(*a).dump(2) << "\n";
      } else {
        out << FormatLoaded(*a);
      }
      return 0;
    }
    case Command::kUnload: {
      absl::StatusOr<v1::UnloadAdapterResponse> r = client.UnloadAdapter(args.id);
      if (!r.ok()) return fail(r.status());
      if (args.json) {
        nlohmann::json j;
        j["id"] = args.id;
        j["draining_requests"] = r->draining_requests();
        out << j.dump(2) << "\n";
      } else if (r->draining_requests() > 0) {
        out << "unloading " << args.id << ": " << r->draining_requests()
            << " running request(s) draining\n";
      } else {
        out << "unloaded " << args.id << "\n";
      }
      return 0;
    }
    case Command::kList: {
      absl::StatusOr<v1::ListAdaptersResponse> r = client.ListAdapters();
      if (!r.ok()) return fail(r.status());
      if (args.json) {
        nlohmann::json j;
        j["adapters"] = nlohmann::json::array();
        for (const auto& a : r->adapters()) j["adapters"].push_back(AdapterToJson(a));
        out << j.dump(2) << "\n";
      } else {
        out << FormatAdapterTable(*r, absl::Now());
      }
      return 0;
    }
    case Command::kStatus: {
      absl::StatusOr<v1::GetStatusResponse> r = client.GetStatus();
      if (!r.ok()) return fail(r.status());
      if (args.json) {
        out << StatusToJson(*r).dump(2) << "\n";
      } else {
        out << FormatStatus(*r);
      }
      return 0;
    }
    case Command::kDrain:
    case Command::kUndrain: {
      absl::StatusOr<ClientOptions> options = MakeClientOptions(args);
      if (!options.ok()) return fail(options.status());
      const bool undrain = args.command == Command::kUndrain;
      absl::StatusOr<v1::DrainWorkerResponse> r =
          DrainWorker(client, *options, args.id, undrain, args.timeout);
      if (!r.ok()) return fail(r.status());
      if (args.json) {
        nlohmann::json j;
        j["worker"] = args.id;
        j["draining"] = !undrain;
        j["moving_requests"] = r->moving_requests();
        out << j.dump(2) << "\n";
      } else if (undrain) {
        out << "undrained " << args.id << "\n";
      } else {
        out << "draining " << args.id << ": " << r->moving_requests()
            << " request(s) moving to other workers\n";
      }
      return 0;
    }
  }
  return fail(absl::InternalError("unhandled command"));
}

}  // namespace loom::loomctl
