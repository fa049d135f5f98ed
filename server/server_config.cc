#include "server/server_config.h"

#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "kernels/kv_quant.h"
#include "nlohmann/json.hpp"

namespace loom {
namespace {

using Setter = std::function<absl::Status(const std::string&, ServerOptions*)>;

absl::Status Bad(const std::string& name, const std::string& value, const std::string& why) {
  return absl::InvalidArgumentError(
      absl::StrFormat("setting %s = '%s' is invalid: %s", name, value, why));
}

Setter Str(std::string ServerOptions::*field) {
  return [field](const std::string& v, ServerOptions* o) {
    o->*field = v;
    return absl::OkStatus();
  };
}

absl::StatusOr<int64_t> ParseInt(const char* name, const std::string& v, int64_t lo,
                                 int64_t hi) {
  int64_t x = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(v), &x)) return Bad(name, v, "not an integer");
  if (x < lo || x > hi) return Bad(name, v, absl::StrFormat("must be in [%d, %d]", lo, hi));
  return x;
}

template <typename T>
Setter Int(const char* name, T ServerOptions::*field, int64_t lo, int64_t hi) {
  return [=](const std::string& v, ServerOptions* o) {
    absl::StatusOr<int64_t> x = ParseInt(name, v, lo, hi);
    if (!x.ok()) return x.status();
    o->*field = static_cast<T>(*x);
    return absl::OkStatus();
  };
}

template <typename T>
Setter Limit(const char* name, T RequestLimits::*field, int64_t lo, int64_t hi) {
  return [=](const std::string& v, ServerOptions* o) {
    absl::StatusOr<int64_t> x = ParseInt(name, v, lo, hi);
    if (!x.ok()) return x.status();
    o->limits.*field = static_cast<T>(*x);
    return absl::OkStatus();
  };
}

Setter Bool(const char* name, bool ServerOptions::*field) {
  return [=](const std::string& v, ServerOptions* o) {
    bool b = false;
    if (!absl::SimpleAtob(absl::StripAsciiWhitespace(v), &b)) {
      return Bad(name, v, "not a boolean");
    }
    o->*field = b;
    return absl::OkStatus();
  };
}

std::vector<std::string> SplitList(const std::string& v) {
  std::vector<std::string> out;
  for (absl::string_view item : absl::StrSplit(v, ',', absl::SkipWhitespace())) {
    out.emplace_back(absl::StripAsciiWhitespace(item));
  }
  return out;
}

absl::Status SetPreload(const std::string& v, ServerOptions* o) {
  o->preload.clear();
  for (const std::string& item : SplitList(v)) {
    std::vector<std::string> kv = absl::StrSplit(item, absl::MaxSplits('=', 1));
    if (kv.size() != 2 || kv[0].empty() || kv[1].empty()) {
      return Bad("preload", v, absl::StrFormat("item '%s' is not id=path", item));
    }
    o->preload.push_back({std::string(absl::StripAsciiWhitespace(kv[0])),
                          std::string(absl::StripAsciiWhitespace(kv[1]))});
  }
  return absl::OkStatus();
}

const std::map<std::string, Setter>& Setters() {
  static const auto* m = new std::map<std::string, Setter>{
      {"model", Str(&ServerOptions::model)},
      {"quantized", Str(&ServerOptions::quantized)},
      {"quant_scheme", Str(&ServerOptions::quant_scheme)},
      {"int8_head", Bool("int8_head", &ServerOptions::int8_head)},
      {"adapter_roots",
       [](const std::string& v, ServerOptions* o) {
         o->adapter_roots = SplitList(v);
         return absl::OkStatus();
       }},
      {"preload", SetPreload},
      {"host", Str(&ServerOptions::host)},
      {"port", Int("port", &ServerOptions::port, 0, 65535)},
      {"admin_host", Str(&ServerOptions::admin_host)},
      {"admin_port", Int("admin_port", &ServerOptions::admin_port, 0, 65535)},
      {"metrics_host", Str(&ServerOptions::metrics_host)},
      {"metrics_port", Int("metrics_port", &ServerOptions::metrics_port, 0, 65535)},
      {"http_host", Str(&ServerOptions::http_host)},
      {"http_port", Int("http_port", &ServerOptions::http_port, 0, 65535)},
      {"http_threads", Int("http_threads", &ServerOptions::http_threads, 1, 4096)},
      {"api_keys_file", Str(&ServerOptions::api_keys_file)},
      {"allow_unauthenticated_inference",
       Bool("allow_unauthenticated_inference", &ServerOptions::allow_unauthenticated_inference)},
      {"max_streams_per_tenant",
       Int("max_streams_per_tenant", &ServerOptions::max_streams_per_tenant, 0, 1 << 20)},
      {"max_batch_tokens",
       Int("max_batch_tokens", &ServerOptions::max_batch_tokens, 1, 1 << 20)},
      {"max_running", Int("max_running", &ServerOptions::max_running, 1, 1 << 16)},
      {"max_queued", Int("max_queued", &ServerOptions::max_queued, 0, 1 << 24)},
      {"kv_bytes", Int("kv_bytes", &ServerOptions::kv_bytes, 1, int64_t{1} << 50)},
      {"kv_page_size", Int("kv_page_size", &ServerOptions::kv_page_size, 1, 4096)},
      {"kv_cache_dtype",
       [](const std::string& v, ServerOptions* o) {
         absl::StatusOr<kernels::KvDtype> dt = kernels::ParseKvDtype(v);
         if (!dt.ok()) return Bad("kv_cache_dtype", v, "must be f16, int8 or int4");
         o->kv_cache_dtype = *dt;
         return absl::OkStatus();
       }},
      {"adapter_bytes",
       Int("adapter_bytes", &ServerOptions::adapter_bytes, 1, int64_t{1} << 50)},
      {"max_context", Int("max_context", &ServerOptions::max_context, 0, 1 << 24)},
      {"threads", Int("threads", &ServerOptions::threads, 0, 4096)},
      {"role",
       [](const std::string& v, ServerOptions* o) {
         for (ServerRole r : {ServerRole::kSingle, ServerRole::kWorker, ServerRole::kRouter}) {
           if (v == ServerRoleName(r)) {
             o->role = r;
             return absl::OkStatus();
           }
         }
         return Bad("role", v, "must be single, worker or router");
       }},
      {"policy",
       [](const std::string& v, ServerOptions* o) {
         if (v != "fcfs" && v != "fair") return Bad("policy", v, "must be fcfs or fair");
         o->policy = v;
         return absl::OkStatus();
       }},
      {"tls_cert", Str(&ServerOptions::tls_cert)},
      {"tls_key", Str(&ServerOptions::tls_key)},
      {"tls_client_ca", Str(&ServerOptions::tls_client_ca)},
      {"admin_token_file", Str(&ServerOptions::admin_token_file)},
      {"on_demand_adapters", Bool("on_demand_adapters", &ServerOptions::on_demand_adapters)},
      {"max_on_demand_loads",
       Int("max_on_demand_loads", &ServerOptions::max_on_demand_loads, 1, 1024)},
      {"max_adapter_file_bytes",
       Int("max_adapter_file_bytes", &ServerOptions::max_adapter_file_bytes, 1,
           int64_t{1} << 50)},
      {"shutdown_grace",
       [](const std::string& v, ServerOptions* o) {
         absl::Duration d;
         if (!absl::ParseDuration(absl::StripAsciiWhitespace(v), &d) ||
             d < absl::ZeroDuration()) {
           return Bad("shutdown_grace", v, "not a non-negative duration such as 30s");
         }
         o->shutdown_grace = d;
         return absl::OkStatus();
       }},
      {"max_prompt_bytes",
       Limit("max_prompt_bytes", &RequestLimits::max_prompt_bytes, 1, int64_t{1} << 32)},
      {"max_prompt_tokens",
       Limit("max_prompt_tokens", &RequestLimits::max_prompt_tokens, 0, 1 << 24)},
      {"max_stop_strings", Limit("max_stop_strings", &RequestLimits::max_stop_strings, 0, 1024)},
      {"max_stop_string_bytes",
       Limit("max_stop_string_bytes", &RequestLimits::max_stop_string_bytes, 1, 1 << 20)},
      {"max_new_tokens", Limit("max_new_tokens", &RequestLimits::max_new_tokens, 0, 1 << 24)},
      {"default_max_tokens",
       Limit("default_max_tokens", &RequestLimits::default_max_tokens, 1, 1 << 24)},
      {"max_top_logprobs", Limit("max_top_logprobs", &RequestLimits::max_top_logprobs, 0, 20)},
      {"max_n", Limit("max_n", &RequestLimits::max_n, 1, 128)},
      {"max_request_bytes",
       Int("max_request_bytes", &ServerOptions::max_request_bytes, 1024, int64_t{1} << 31)},
      {"log_level",
       [](const std::string& v, ServerOptions* o) {
         static const char* kLevels[] = {"trace", "debug", "info", "warn", "error", "off"};
         for (const char* l : kLevels) {
           if (v == l) {
             o->log_level = v;
             return absl::OkStatus();
           }
         }
         return Bad("log_level", v, "must be trace, debug, info, warn, error or off");
       }},
  };
  return *m;
}

// A JSON value as the text a flag would carry.
absl::StatusOr<std::string> JsonToSetting(const std::string& key, const nlohmann::json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_boolean()) return std::string(v.get<bool>() ? "true" : "false");
  if (v.is_number_integer() || v.is_number_unsigned()) return v.dump();
  if (v.is_array()) {
    std::vector<std::string> items;
    for (const auto& e : v) {
      if (!e.is_string()) {
        return absl::InvalidArgumentError(
            absl::StrFormat("config key '%s': array items must be strings", key));
      }
      items.push_back(e.get<std::string>());
    }
    return absl::StrJoin(items, ",");
  }
  if (v.is_object() && key == "preload") {
    std::vector<std::string> items;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!it.value().is_string()) {
        return absl::InvalidArgumentError("config key 'preload': values must be paths");
      }
      items.push_back(it.key() + "=" + it.value().get<std::string>());
    }
    return absl::StrJoin(items, ",");
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("config key '%s' has an unsupported value %s", key, v.dump()));
}

}  // namespace

const char* ServerRoleName(ServerRole role) {
  switch (role) {
    case ServerRole::kSingle:
      return "single";
    case ServerRole::kWorker:
      return "worker";
    case ServerRole::kRouter:
      return "router";
  }
  return "single";
}

const std::vector<std::string>& SettingNames() {
  static const auto* names = [] {
    auto* v = new std::vector<std::string>();
    for (const auto& [k, unused] : Setters()) v->push_back(k);
    return v;
  }();
  return *names;
}

absl::Status ApplySetting(const std::string& name, const std::string& value,
                          ServerOptions* options) {
  auto it = Setters().find(name);
  if (it == Setters().end()) {
    return absl::InvalidArgumentError(absl::StrFormat("unknown setting '%s'", name));
  }
  return it->second(value, options);
}

absl::Status ApplyConfigJson(const std::string& json_text, ServerOptions* options) {
  nlohmann::json doc = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return absl::InvalidArgumentError("config file is not a JSON object");
  }
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    absl::StatusOr<std::string> v = JsonToSetting(it.key(), it.value());
    if (!v.ok()) return v.status();
    if (absl::Status s = ApplySetting(it.key(), *v, options); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("config file: ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status ApplyConfigFile(const std::string& path, ServerOptions* options) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrFormat("cannot read config file '%s'", path));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  absl::Status s = ApplyConfigJson(ss.str(), options);
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
  return s;
}

bool IsLoopbackHost(const std::string& host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  const std::vector<absl::string_view> parts = absl::StrSplit(host, '.');
  if (parts.size() != 4 || parts[0] != "127") return false;
  for (absl::string_view part : parts) {
    int value = 0;
    const bool digits = !part.empty() && part.size() <= 3 &&
                        part.find_first_not_of("0123456789") == absl::string_view::npos;
    if (!digits || !absl::SimpleAtoi(part, &value) || value > 255) return false;
  }
  return true;
}

absl::Status ServerOptions::Validate() const {
  if (tls_cert.empty() != tls_key.empty()) {
    return absl::InvalidArgumentError("tls_cert and tls_key must be given together");
  }
  if (!tls_client_ca.empty() && tls_cert.empty()) {
    return absl::InvalidArgumentError("tls_client_ca (mTLS) requires tls_cert and tls_key");
  }
  if (!IsLoopbackHost(admin_host) && admin_token_file.empty() && tls_client_ca.empty()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "admin_host = '%s' is not loopback: an admin_token_file or mTLS (tls_client_ca) "
        "is required",
        admin_host));
  }
  // Inference listeners: gRPC (single, router) and HTTP (when on).
  const bool open_inference = api_keys_file.empty() && !allow_unauthenticated_inference;
  auto exposed = [&](const char* name, const std::string& value) -> absl::Status {
    if (!open_inference || IsLoopbackHost(value)) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s = '%s' is not loopback: serving inference off loopback requires an "
        "api_keys_file (or allow_unauthenticated_inference=true to serve it open)",
        name, value));
  };
  if (role != ServerRole::kWorker) {
    if (absl::Status s = exposed("host", host); !s.ok()) return s;
    if (http_port != 0) {
      if (absl::Status s = exposed("http_host", http_host); !s.ok()) return s;
    }
  }
  if (port != 0 && port == admin_port && host == admin_host) {
    return absl::InvalidArgumentError(
        absl::StrFormat("port and admin_port are both %d on %s", port, host));
  }
  if (!quant_scheme.empty()) {
    if (quantized.empty()) {
      return absl::InvalidArgumentError("quant_scheme requires quantized (a checkpoint)");
    }
    if (quant_scheme != "w4a4" && quant_scheme != "w4a8") {
      return absl::InvalidArgumentError(absl::StrFormat(
          "quant_scheme = '%s': must be w4a4 or w4a8 (weight bits come from the checkpoint)",
          quant_scheme));
    }
  }
  if (int8_head && quantized.empty()) {
    return absl::InvalidArgumentError("int8_head requires quantized (a checkpoint)");
  }
  for (const PreloadAdapter& p : preload) {
    if (p.id.empty() || p.source.empty()) {
      return absl::InvalidArgumentError("preload items must be id=path");
    }
  }
  return absl::OkStatus();
}

}  // namespace loom
