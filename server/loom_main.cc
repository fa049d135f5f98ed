// `loom`: the local command-line tool. Subcommands:
//   generate   run the model on one prompt and stream the completion
#include <cstdio>
#include <string>
#include <vector>

#include "server/cli/generate_command.h"

namespace {

constexpr char kUsage[] =
    "usage: loom <command> [flags]\n"
    "commands:\n"
    "  generate   stream a completion for one prompt (loom generate --help)\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  if (command == "generate") {
    absl::Status s = loom::cli::RunGenerate(args);
    if (!s.ok()) {
      std::fprintf(stderr, "loom generate: %s\n", std::string(s.message()).c_str());
      return s.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
    }
    return 0;
  }
  if (command == "--help" || command == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  std::fprintf(stderr, "loom: unknown command '%s'\n%s", command.c_str(), kUsage);
  return 2;
}
