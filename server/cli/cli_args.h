// Command-line arguments of the `loom` tool: `--name value`, `--name=value`, bare
// boolean `--name`, and positionals. Names may use '-' or '_' ("--max-tokens" and
// "--max_tokens" are the same flag).
#ifndef LOOM_SERVER_CLI_CLI_ARGS_H_
#define LOOM_SERVER_CLI_CLI_ARGS_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace loom::cli {

struct FlagSpec {
  std::set<std::string> value_flags;  // take a value (normalised names, '_' form)
  std::set<std::string> bool_flags;   // take none
};

class CliArgs {
 public:
  // InvalidArgument naming the flag for an unknown flag or a missing value.
  static absl::StatusOr<CliArgs> Parse(const std::vector<std::string>& args,
                                       const FlagSpec& spec);

  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::string GetString(const std::string& name, const std::string& fallback) const;
  absl::StatusOr<int> GetInt(const std::string& name, int fallback) const;
  absl::StatusOr<double> GetDouble(const std::string& name, double fallback) const;
  absl::StatusOr<uint64_t> GetUint64(const std::string& name, uint64_t fallback) const;
  const std::vector<std::string>& positionals() const { return positionals_; }

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> positionals_;
};

}  // namespace loom::cli

#endif  // LOOM_SERVER_CLI_CLI_ARGS_H_
