// loomctl: admin CLI for loomd (loom.v1.Admin). See `loomctl --help`.
// Exit status: 0 success, 1 error from the server or reading files, 2 usage error.
#include <iostream>
#include <string>
#include <vector>

#include "clients/cpp/loom_client.h"
#include "clients/loomctl/loomctl_lib.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  absl::StatusOr<loom::loomctl::Args> parsed = loom::loomctl::ParseArgs(args);
  if (!parsed.ok()) {
    std::cerr << "loomctl: " << parsed.status().message() << "\n"
              << loom::loomctl::UsageText();
    return 2;
  }
  if (parsed->command == loom::loomctl::Command::kHelp) {
    std::cout << loom::loomctl::UsageText();
    return 0;
  }
  absl::StatusOr<loom::ClientOptions> options = loom::loomctl::MakeClientOptions(*parsed);
  if (!options.ok()) {
    std::cerr << loom::loomctl::ErrorLine(options.status()) << "\n";
    return 1;
  }
  auto client = loom::LoomClient::Create(parsed->addr, *options);
  if (!client.ok()) {
    std::cerr << loom::loomctl::ErrorLine(client.status()) << "\n";
    return 1;
  }
  return loom::loomctl::Run(*parsed, **client, std::cout, std::cerr);
}
