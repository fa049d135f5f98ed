// RequestLimits: what one request may ask for (request_validation.h applies them).
#ifndef LOOM_SERVER_REQUEST_LIMITS_H_
#define LOOM_SERVER_REQUEST_LIMITS_H_

#include <cstdint>

namespace loom {

// Limits on what one request may ask for; each is a loomd flag / config key of the same
// name (server_config.h).
struct RequestLimits {
  int64_t max_prompt_bytes = 1 << 20;  // text, or all chat roles + contents together
  int max_prompt_tokens = 0;           // after templating; 0 = the context's length
  int max_stop_strings = 16;
  int max_stop_string_bytes = 256;
  int max_new_tokens = 0;              // the most max_tokens may be; 0 = the context's
  int default_max_tokens = 256;        // when a request names none (capped to what fits)
  int max_top_logprobs = 20;           // at most kMaxTopLogprobs
  int max_n = 8;                       // choices per OpenAI request
  int max_context = 0;                 // prompt + max_tokens; set from the served model
};

}  // namespace loom

#endif  // LOOM_SERVER_REQUEST_LIMITS_H_
