#include "models/tp/tensor_parallel_llama.h"

#include <thread>

#include "absl/strings/str_format.h"

namespace loom {

absl::StatusOr<std::unique_ptr<TensorParallelLlama>> TensorParallelLlama::Create(
    std::unique_ptr<ModelSource> source, std::vector<kernels::Backend*> backends,
    std::vector<kernels::LoraOps*> lora, std::vector<std::unique_ptr<Communicator>> comms) {
  const int w = static_cast<int>(comms.size());
  if (source == nullptr || w == 0) {
    return absl::InvalidArgumentError("TensorParallelLlama: a source and communicators are "
                                      "required");
  }
  if (static_cast<int>(backends.size()) != w ||
      (!lora.empty() && static_cast<int>(lora.size()) != w)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "TensorParallelLlama: %d communicators but %d backends and %d LoRA kernels", w,
        backends.size(), lora.size()));
  }
  for (int r = 0; r < w; ++r) {
    if (comms[r] == nullptr || comms[r]->rank() != r || comms[r]->world_size() != w ||
        backends[r] == nullptr) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "TensorParallelLlama: rank %d needs a backend and communicator rank %d of %d", r, r,
          w));
    }
  }
  std::unique_ptr<TensorParallelLlama> m(new TensorParallelLlama());
  for (int r = 0; r < w; ++r) {
    absl::StatusOr<TpShard> shard = TpShard::Cut(*source, r, w);
    if (!shard.ok()) return shard.status();
    m->ranks_.push_back(std::make_unique<TpRankModel>(source->config(), *std::move(shard),
                                                      backends[r],
                                                      lora.empty() ? nullptr : lora[r],
                                                      comms[r].get()));
  }
  m->source_ = std::move(source);
  m->comms_ = std::move(comms);
  return m;
}

absl::Status TensorParallelLlama::Forward(const BatchPlan& plan, TpKvCache* kv,
                                          TpWorkspaces* ws, float* logits) const {
  const int w = world();
  if (kv == nullptr || kv->world() != w) {
    return absl::InvalidArgumentError(
        absl::StrFormat("TensorParallelLlama: KV cache is not split for %d ranks", w));
  }
  // Plan errors leave the group usable: found here, before any rank starts.
  for (int r = 0; r < w; ++r) {
    if (absl::Status s = ranks_[r]->Check(plan, *kv->rank(r)); !s.ok()) return s;
  }
  if (static_cast<int>(ws->ranks.size()) < w) ws->ranks.resize(w);
  std::vector<absl::Status> status(w);
  auto run = [&](int r, float* out) {
    status[r] = ranks_[r]->Forward(plan, kv->rank(r), &ws->ranks[r], out);
    if (!status[r].ok()) comms_[r]->Abort(status[r]);  // never leave the peers waiting
  };
  std::vector<std::thread> threads;
  threads.reserve(w - 1);
  for (int r = 1; r < w; ++r) threads.emplace_back(run, r, nullptr);
  run(0, logits);
  for (std::thread& t : threads) t.join();
  for (const absl::Status& s : status) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace loom
