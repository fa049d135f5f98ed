#include "models/quant/calibration_runner.h"

#include <cctype>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "models/kv_cache/paged_kv_cache.h"
#include "models/llama/batch_plan.h"
#include "models/quant/quant_options.h"

namespace loom::quant {

absl::StatusOr<std::vector<std::vector<int32_t>>> CalibrationSequences(const Tokenizer& tokenizer,
                                                                       std::string_view text,
                                                                       int sequences, int seq_len) {
  if (sequences < 1 || seq_len < 1) {
    return absl::InvalidArgumentError(absl::StrCat("calibration: ", sequences, " sequences of ",
                                                   seq_len, " tokens requested"));
  }
  bool blank = true;
  for (char c : text) {
    if (!std::isspace(static_cast<unsigned char>(c))) {
      blank = false;
      break;
    }
  }
  if (blank) return absl::InvalidArgumentError("calibration text is empty");
  absl::StatusOr<std::vector<int32_t>> ids = tokenizer.Encode(text, /*add_bos=*/false);
  if (!ids.ok()) return ids.status();
  const int64_t n = static_cast<int64_t>(ids->size());
  const int64_t need = static_cast<int64_t>(sequences) * seq_len;
  if (n < need) {
    return absl::InvalidArgumentError(absl::StrCat("calibration text has ", n, " tokens, ",
                                                   sequences, " x ", seq_len, " = ", need,
                                                   " are needed"));
  }
  const int64_t stride = n / sequences;
  std::vector<std::vector<int32_t>> out(sequences);
  for (int i = 0; i < sequences; ++i) {
    out[i].assign(ids->begin() + i * stride, ids->begin() + i * stride + seq_len);
  }
  return out;
}

absl::StatusOr<CalibrationStats> RunCalibration(const LlamaModel& model,
                                                const std::vector<std::vector<int32_t>>& seqs,
                                                bool hessian, kernels::Backend* hessian_backend,
                                                const std::function<void(int, int)>& progress) {
  if (seqs.empty()) return absl::InvalidArgumentError("calibration: no sequences");
  size_t longest = 0;
  for (const auto& s : seqs) longest = std::max(longest, s.size());
  if (longest == 0 || static_cast<int64_t>(longest) > model.config().max_context) {
    return absl::InvalidArgumentError(absl::StrCat("calibration: sequences of ", longest,
                                                   " tokens (model context ",
                                                   model.config().max_context, ")"));
  }
  KvCacheOptions kvo;
  kvo.budget_bytes = 0;
  kvo.n_pages = static_cast<int>((longest + kvo.page_size - 1) / kvo.page_size) + 1;
  absl::StatusOr<std::unique_ptr<PagedKvCache>> kv = PagedKvCache::Create(model.config(), kvo);
  if (!kv.ok()) return kv.status();
  CalibrationTap tap(model.config().n_layers, ActivationWidths(model.config()), hessian,
                     hessian_backend);
  ForwardWorkspace ws;
  ws.tap = &tap;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const int32_t seq = (*kv)->NewSequence();
    absl::Status s = (*kv)->Reserve(seq, static_cast<int>(seqs[i].size()));
    if (s.ok()) {
      SequenceChunk c;
      c.kv_seq = seq;
      c.start_pos = 0;
      c.tokens = seqs[i];
      c.logits = SequenceChunk::Logits::kNone;
      absl::StatusOr<BatchPlan> plan = BatchPlan::Build({c}, **kv, model.config().vocab_size);
      s = plan.ok() ? model.Forward(*plan, kv->get(), &ws, nullptr) : plan.status();
    }
    (*kv)->Release(seq);
    if (!s.ok()) return s;
    if (!tap.status().ok()) return tap.status();
    if (progress) progress(static_cast<int>(i + 1), static_cast<int>(seqs.size()));
  }
  return tap.Take();
}

}  // namespace loom::quant
