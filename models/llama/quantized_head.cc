#include "models/llama/quantized_head.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_format.h"
#include "kernels/dtype.h"

namespace loom {

int HeadOutliers(int hidden) { return std::min(128, hidden / 8 / 32 * 32); }

absl::StatusOr<QuantizedHead> QuantizeOutputHead(const kernels::WeightMatrix& output) {
  const int64_t rows = output.rows;
  const int k = static_cast<int>(output.cols);
  if (rows <= 0 || k < 64 || output.data == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "output head [%d, %d]: the INT8 head needs a non-empty matrix with >= 64 columns",
        rows, k));
  }
  // Two passes over the stored rows (energy, then the permuted copy) so that only one
  // float copy of the matrix exists at a time.
  std::vector<float> row(k);
  std::vector<double> energy(k, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    DequantizeRow(output.dtype, output.data + r * output.row_bytes, row.data(), k);
    for (int j = 0; j < k; ++j) energy[j] += static_cast<double>(row[j]) * row[j];
  }
  QuantizedHead head;
  head.perm.resize(k);
  std::iota(head.perm.begin(), head.perm.end(), 0);
  // Ascending energy, ties by channel index: the highest-energy channels end up last.
  std::stable_sort(head.perm.begin(), head.perm.end(),
                   [&](int32_t a, int32_t b) { return energy[a] < energy[b]; });
  std::vector<float> permuted(static_cast<size_t>(rows) * k);
  for (int64_t r = 0; r < rows; ++r) {
    DequantizeRow(output.dtype, output.data + r * output.row_bytes, row.data(), k);
    kernels::quant::PermuteColumns(row.data(), 1, k, head.perm.data(), permuted.data() + r * k);
  }
  const kernels::quant::QuantSpec spec{k, HeadOutliers(k), kHeadGroup, 8, 8};
  absl::StatusOr<kernels::quant::AtomWeight> q =
      kernels::quant::QuantizeWeightRTN(permuted.data(), rows, spec);
  if (!q.ok()) return q.status();
  head.weight = *std::move(q);
  return head;
}

}  // namespace loom
