#include "models/tp/tp_adapter.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace loom {
namespace {

// Input / output widths of projection p in the full model.
void Widths(const LlamaConfig& c, Projection p, int64_t* h_in, int64_t* h_out) {
  const int64_t qd = int64_t{c.n_heads} * c.head_dim;
  const int64_t kvd = int64_t{c.n_kv_heads} * c.head_dim;
  switch (p) {
    case Projection::kQ: *h_in = c.hidden; *h_out = qd; return;
    case Projection::kK:
    case Projection::kV: *h_in = c.hidden; *h_out = kvd; return;
    case Projection::kO: *h_in = qd; *h_out = c.hidden; return;
    case Projection::kGate:
    case Projection::kUp: *h_in = c.hidden; *h_out = c.intermediate; return;
    case Projection::kDown: *h_in = c.intermediate; *h_out = c.hidden; return;
  }
}

bool RowParallel(Projection p) { return p == Projection::kO || p == Projection::kDown; }

}  // namespace

absl::StatusOr<std::unique_ptr<TpAdapter>> TpAdapter::Create(const AdapterWeights* full,
                                                             const LlamaConfig& c,
                                                             int world) {
  if (full == nullptr) return absl::InvalidArgumentError("TpAdapter: no adapter");
  if (world < 1 || c.n_heads % world != 0 || c.n_kv_heads % world != 0 ||
      c.intermediate % world != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "TpAdapter: %d ranks do not divide n_heads %d, n_kv_heads %d, intermediate %d", world,
        c.n_heads, c.n_kv_heads, c.intermediate));
  }
  std::unique_ptr<TpAdapter> a(new TpAdapter(full));
  a->shards_.resize(world);
  const size_t n_pairs = static_cast<size_t>(c.n_layers) * kNumProjections;
  for (TpAdapterShard& s : a->shards_) s.pairs_.assign(n_pairs, kernels::LoraPair{});
  for (int l = 0; l < c.n_layers; ++l) {
    for (int pi = 0; pi < kNumProjections; ++pi) {
      const Projection p = static_cast<Projection>(pi);
      const kernels::LoraPair* f = full->Pair(l, p);
      if (f == nullptr || f->rank <= 0) continue;
      int64_t h_in = 0, h_out = 0;
      Widths(c, p, &h_in, &h_out);
      for (int r = 0; r < world; ++r) {
        TpAdapterShard& s = a->shards_[r];
        kernels::LoraPair q = *f;
        if (RowParallel(p)) {  // A: columns [r*h_in/W, ...) of each rank row; B whole
          const int64_t w_in = h_in / world;
          std::vector<uint16_t> sa(static_cast<size_t>(f->rank) * w_in);
          for (int k = 0; k < f->rank; ++k) {
            std::copy_n(f->a + k * h_in + r * w_in, w_in, sa.data() + k * w_in);
          }
          q.a = sa.data();
          s.owned_.push_back(std::move(sa));
        } else {  // A whole; B: rows [r*h_out/W, ...)
          q.b = f->b + static_cast<size_t>(r) * (h_out / world) * f->rank;
        }
        s.pairs_[static_cast<size_t>(l) * kNumProjections + pi] = q;
        s.max_rank_ = std::max(s.max_rank_, f->rank);
      }
    }
  }
  return a;
}

}  // namespace loom
