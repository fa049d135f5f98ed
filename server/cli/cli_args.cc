#include "server/cli/cli_args.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"

namespace loom::cli {
namespace {

std::string Normalise(std::string name) {
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

}  // namespace

absl::StatusOr<CliArgs> CliArgs::Parse(const std::vector<std::string>& args,
                                       const FlagSpec& spec) {
  CliArgs out;
  bool only_positionals = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (only_positionals || a.size() < 3 || a.compare(0, 2, "--") != 0) {
      if (a == "--") {
        only_positionals = true;
        continue;
      }
      out.positionals_.push_back(a);
      continue;
    }
    std::string body = a.substr(2);
    std::string value;
    bool has_value = false;
    if (size_t eq = body.find('='); eq != std::string::npos) {
      value = body.substr(eq + 1);
      body = body.substr(0, eq);
      has_value = true;
    }
    const std::string name = Normalise(body);
    if (spec.bool_flags.count(name)) {
      if (has_value && value != "true" && value != "false") {
        return absl::InvalidArgumentError(
            absl::StrFormat("--%s takes no value (or true/false), got '%s'", body, value));
      }
      out.values_[name] = has_value ? value : "true";
    } else if (spec.value_flags.count(name)) {
      if (!has_value) {
        if (i + 1 >= args.size()) {
          return absl::InvalidArgumentError(absl::StrFormat("--%s needs a value", body));
        }
        value = args[++i];
      }
      out.values_[name] = value;
    } else {
      return absl::InvalidArgumentError(absl::StrFormat("unknown flag --%s", body));
    }
  }
  return out;
}

std::string CliArgs::GetString(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

absl::StatusOr<int> CliArgs::GetInt(const std::string& name, int fallback) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  int v;
  if (!absl::SimpleAtoi(it->second, &v)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--%s: '%s' is not an integer", name, it->second));
  }
  return v;
}

absl::StatusOr<double> CliArgs::GetDouble(const std::string& name, double fallback) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  double v;
  if (!absl::SimpleAtod(it->second, &v)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--%s: '%s' is not a number", name, it->second));
  }
  return v;
}

absl::StatusOr<uint64_t> CliArgs::GetUint64(const std::string& name, uint64_t fallback) const {
  auto it = values_.find(name);
  if (it == values_.end()) return fallback;
  uint64_t v;
  if (!absl::SimpleAtoi(it->second, &v)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("--%s: '%s' is not a non-negative integer", name, it->second));
  }
  return v;
}

}  // namespace loom::cli
