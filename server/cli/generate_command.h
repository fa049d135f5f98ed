// `loom generate [--model PATH] [--chat] [--max-tokens N] [--temperature T] [--top-p P]
//  [--top-k K] [--min-p M] [--repeat-penalty R] [--seed S] [--stop STR] [--threads N]
//  PROMPT`: loads the model, streams the completion to stdout as it is produced, then
// prints one timing line (prompt and decode tokens/s) to stderr.
#ifndef LOOM_SERVER_CLI_GENERATE_COMMAND_H_
#define LOOM_SERVER_CLI_GENERATE_COMMAND_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace loom::cli {

// args: everything after "generate". Returns the error to print (exit code 2 for usage
// errors, 1 otherwise is the caller's choice by code).
absl::Status RunGenerate(const std::vector<std::string>& args);

extern const char kGenerateUsage[];

}  // namespace loom::cli

#endif  // LOOM_SERVER_CLI_GENERATE_COMMAND_H_
