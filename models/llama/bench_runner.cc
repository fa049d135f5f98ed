#include "models/llama/bench_runner.h"

#include <algorithm>
#include <random>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "models/llama/batch_plan.h"
#include "models/llama/bench_stats.h"

namespace loom::bench {

absl::StatusOr<std::vector<Config>> ParseConfigs(const std::string& text) {
  std::vector<Config> out;
  for (absl::string_view item : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    std::vector<absl::string_view> bp = absl::StrSplit(item, absl::ByAnyChar("xX"));
    Config c;
    if (bp.size() != 2 || !absl::SimpleAtoi(bp[0], &c.batch) ||
        !absl::SimpleAtoi(bp[1], &c.prompt_len) || c.batch < 1 || c.prompt_len < 1) {
      return absl::InvalidArgumentError(absl::StrCat("bad --configs item '", item, "'"));
    }
    out.push_back(c);
  }
  if (out.empty()) return absl::InvalidArgumentError("--configs is empty");
  return out;
}

int32_t PagesFor(const std::vector<Config>& configs, int decode_steps, int page_size) {
  int32_t pages = 0;
  for (const Config& c : configs) {
    const int32_t per_seq = (c.prompt_len + decode_steps + page_size - 1) / page_size;
    pages = std::max(pages, per_seq * c.batch);
  }
  return pages;
}

std::vector<std::vector<int32_t>> RandomPrompts(const Config& c, int vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int32_t>> prompts(c.batch, std::vector<int32_t>(c.prompt_len));
  for (auto& p : prompts) {
    for (int32_t& t : p) t = 3 + static_cast<int32_t>(rng() % std::min(49000, vocab - 3));
  }
  return prompts;
}

absl::StatusOr<RunTimes> Runner::Run(const std::vector<std::vector<int32_t>>& prompts) {
  const int B = static_cast<int>(prompts.size());
  std::vector<int32_t> seqs(B), next(B);
  generated_.assign(B, {});
  for (int s = 0; s < B; ++s) {
    seqs[s] = kv_->NewSequence();
    absl::Status st = kv_->Reserve(seqs[s], static_cast<int32_t>(prompts[s].size()) + steps_);
    if (!st.ok()) return st;
  }
  RunTimes times;
  absl::Status st = Prefill(prompts, seqs, &next, &times.prefill_s);
  if (st.ok()) st = Decode(prompts, seqs, &next, &times.decode_s);
  for (int32_t s : seqs) kv_->Release(s);
  if (!st.ok()) return st;
  return times;
}

// Runs `chunks` as one step and writes the argmax of each logits row to the chunk's
// sequence in `next` (chunks[c].kv_seq -> next[owner[c]]).
absl::Status Runner::Step(const std::vector<SequenceChunk>& chunks,
                          const std::vector<int>& owner, std::vector<int32_t>* next) {
  const int vocab = model_->config().vocab_size;
  absl::StatusOr<BatchPlan> plan = BatchPlan::Build(chunks, *kv_, vocab);
  if (!plan.ok()) return plan.status();
  logits_.resize(plan->logit_tokens().size() * static_cast<size_t>(vocab));
  absl::Status st = model_->Forward(*plan, kv_, &ws_, logits_.data());
  if (!st.ok()) return st;
  StepTimer timer(ws_.profile, StepOp::kSample);
  for (size_t c = 0; c < chunks.size(); ++c) {
    const auto [r0, r1] = plan->logit_rows(c);
    if (r1 > r0) {
      (*next)[owner[c]] = Argmax(logits_.data() + static_cast<size_t>(r1 - 1) * vocab, vocab);
    }
  }
  return absl::OkStatus();
}

absl::Status Runner::Prefill(const std::vector<std::vector<int32_t>>& prompts,
                             const std::vector<int32_t>& seqs, std::vector<int32_t>* next,
                             double* seconds) {
  const Clock::time_point t0 = Clock::now();
  std::vector<SequenceChunk> chunks;
  std::vector<int> owner;
  int in_step = 0;
  for (size_t s = 0; s < prompts.size(); ++s) {
    const int P = static_cast<int>(prompts[s].size());
    for (int pos = 0; pos < P;) {
      const int take = std::min(P - pos, budget_ - in_step);
      SequenceChunk c;
      c.kv_seq = seqs[s];
      c.start_pos = pos;
      c.tokens.assign(prompts[s].begin() + pos, prompts[s].begin() + pos + take);
      c.logits = pos + take == P ? SequenceChunk::Logits::kLast : SequenceChunk::Logits::kNone;
      chunks.push_back(std::move(c));
      owner.push_back(static_cast<int>(s));
      pos += take;
      in_step += take;
      if (in_step == budget_) {
        absl::Status st = Step(chunks, owner, next);
        if (!st.ok()) return st;
        chunks.clear();
        owner.clear();
        in_step = 0;
      }
    }
  }
  if (!chunks.empty()) {
    absl::Status st = Step(chunks, owner, next);
    if (!st.ok()) return st;
  }
  *seconds = Seconds(t0, Clock::now());
  return absl::OkStatus();
}

absl::Status Runner::Decode(const std::vector<std::vector<int32_t>>& prompts,
                            const std::vector<int32_t>& seqs, std::vector<int32_t>* next,
                            double* seconds) {
  const int B = static_cast<int>(prompts.size());
  std::vector<int> owner(B);
  for (int s = 0; s < B; ++s) owner[s] = s;
  std::vector<SequenceChunk> chunks(B);
  ws_.profile = decode_profile_;
  const Clock::time_point t0 = Clock::now();
  for (int step = 0; step < steps_; ++step) {
    for (int s = 0; s < B; ++s) {
      chunks[s].kv_seq = seqs[s];
      chunks[s].start_pos = static_cast<int32_t>(prompts[s].size()) + step;
      chunks[s].tokens.assign(1, (*next)[s]);
      chunks[s].logits = SequenceChunk::Logits::kLast;
      generated_[s].push_back((*next)[s]);
    }
    absl::Status st = Step(chunks, owner, next);
    if (!st.ok()) {
      ws_.profile = nullptr;
      return st;
    }
  }
  *seconds = Seconds(t0, Clock::now());
  ws_.profile = nullptr;
  return absl::OkStatus();
}

}  // namespace loom::bench
