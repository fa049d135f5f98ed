#include "models/eval/greedy_agreement.h"

#include <algorithm>
#include <memory>

#include "models/kv_cache/paged_kv_cache.h"
#include "models/llama/batch_plan.h"

namespace loom {
namespace {

int32_t Argmax(const float* row, int n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

}  // namespace

absl::StatusOr<GreedyRun> RunGreedy(const LlamaModel& model,
                                    const std::vector<std::vector<int32_t>>& prompts, int gen,
                                    const AdapterWeights* adapter) {
  if (prompts.empty() || gen < 0) return absl::InvalidArgumentError("RunGreedy: bad input");
  const int vocab = model.config().vocab_size;
  KvCacheOptions kvo;
  int32_t pages = 0;
  for (const auto& p : prompts) {
    if (p.empty()) return absl::InvalidArgumentError("RunGreedy: empty prompt");
    pages += static_cast<int32_t>((p.size() + gen + kvo.page_size - 1) / kvo.page_size);
  }
  kvo.n_pages = pages;
  absl::StatusOr<std::unique_ptr<PagedKvCache>> kv = PagedKvCache::Create(model.config(), kvo);
  if (!kv.ok()) return kv.status();
  const size_t B = prompts.size();
  std::vector<SequenceChunk> chunks(B);
  for (size_t s = 0; s < B; ++s) {
    chunks[s].kv_seq = (*kv)->NewSequence();
    chunks[s].tokens = prompts[s];
    chunks[s].logits = SequenceChunk::Logits::kAll;
    chunks[s].adapter = adapter;
    if (absl::Status st = (*kv)->Reserve(chunks[s].kv_seq, prompts[s].size() + gen); !st.ok()) {
      return st;
    }
  }
  GreedyRun out;
  out.argmax.resize(B);
  out.generated.resize(B);
  ForwardWorkspace ws;
  std::vector<float> logits;
  for (int step = 0; step <= gen; ++step) {
    absl::StatusOr<BatchPlan> plan = BatchPlan::Build(chunks, **kv, vocab);
    if (!plan.ok()) return plan.status();
    logits.resize(plan->logit_tokens().size() * static_cast<size_t>(vocab));
    if (absl::Status st = model.Forward(*plan, kv->get(), &ws, logits.data()); !st.ok()) {
      return st;
    }
    for (size_t s = 0; s < B; ++s) {
      const auto [r0, r1] = plan->logit_rows(s);
      if (step == 0) {
        for (int r = r0; r < r1; ++r) {
          out.argmax[s].push_back(Argmax(logits.data() + static_cast<size_t>(r) * vocab, vocab));
        }
      }
      const int32_t next = Argmax(logits.data() + static_cast<size_t>(r1 - 1) * vocab, vocab);
      if (step == gen) continue;
      out.generated[s].push_back(next);
      chunks[s].start_pos += static_cast<int32_t>(chunks[s].tokens.size());
      chunks[s].tokens.assign(1, next);
      chunks[s].logits = SequenceChunk::Logits::kLast;
    }
  }
  return out;
}

AgreementStats Compare(const GreedyRun& test, const GreedyRun& ref) {
  AgreementStats st;
  int64_t same = 0, gen_same = 0, gen_total = 0;
  double prefix = 0;
  for (size_t s = 0; s < ref.argmax.size(); ++s) {
    for (size_t p = 0; p < ref.argmax[s].size(); ++p) same += test.argmax[s][p] == ref.argmax[s][p];
    st.positions += static_cast<int64_t>(ref.argmax[s].size());
    const auto& a = test.generated[s];
    const auto& b = ref.generated[s];
    size_t k = 0;
    while (k < a.size() && a[k] == b[k]) ++k;
    prefix += static_cast<double>(k);
    for (size_t i = 0; i < a.size(); ++i) gen_same += a[i] == b[i];
    gen_total += static_cast<int64_t>(a.size());
  }
  st.top1 = st.positions ? static_cast<double>(same) / st.positions : 0;
  st.gen_prefix = ref.argmax.empty() ? 0 : prefix / ref.argmax.size();
  st.gen_match = gen_total ? static_cast<double>(gen_same) / gen_total : 0;
  return st;
}

AdapterDirection CompareAdapter(const GreedyRun& ref, const GreedyRun& ref_adapter,
                                const GreedyRun& test, const GreedyRun& test_adapter) {
  AdapterDirection d;
  int64_t followed = 0, followed_base = 0;
  for (size_t s = 0; s < ref.argmax.size(); ++s) {
    for (size_t p = 0; p < ref.argmax[s].size(); ++p) {
      const int32_t target = ref_adapter.argmax[s][p];
      if (target == ref.argmax[s][p]) continue;
      ++d.moved;
      followed += test_adapter.argmax[s][p] == target;
      followed_base += test.argmax[s][p] == target;
    }
  }
  if (d.moved > 0) {
    d.followed = static_cast<double>(followed) / d.moved;
    d.followed_base = static_cast<double>(followed_base) / d.moved;
  }
  return d;
}

}  // namespace loom
