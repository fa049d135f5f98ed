#include "models/model_config.h"

#include "absl/strings/str_format.h"

namespace loom {

absl::Status LlamaConfig::Validate() const {
  auto bad = [&](const char* what, long v) {
    return absl::InvalidArgumentError(
        absl::StrFormat("model config: %s = %d is out of range", what, v));
  };
  if (vocab_size <= 0 || vocab_size > (1 << 22)) return bad("vocab_size", vocab_size);
  if (hidden <= 0 || hidden > (1 << 16)) return bad("hidden", hidden);
  if (intermediate <= 0 || intermediate > (1 << 18)) return bad("intermediate", intermediate);
  if (n_layers <= 0 || n_layers > 1024) return bad("n_layers", n_layers);
  if (n_heads <= 0 || n_heads > 1024) return bad("n_heads", n_heads);
  if (n_kv_heads <= 0 || n_kv_heads > n_heads) return bad("n_kv_heads", n_kv_heads);
  if (n_heads % n_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "model config: n_heads %d is not a multiple of n_kv_heads %d", n_heads, n_kv_heads));
  }
  if (head_dim <= 0 || head_dim > 1024 || head_dim % 2 != 0) return bad("head_dim", head_dim);
  if (max_context <= 0 || max_context > (1 << 24)) return bad("max_context", max_context);
  if (!(rms_eps > 0.0f) || !(rope_theta > 0.0f)) {
    return absl::InvalidArgumentError("model config: rms_eps and rope_theta must be positive");
  }
  return absl::OkStatus();
}

}  // namespace loom
