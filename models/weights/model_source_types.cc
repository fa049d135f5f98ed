// WeightTensor shape helpers and ModelSource lookups (format independent).
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "models/weights/model_source.h"

namespace loom {

int64_t WeightTensor::rows() const {
  if (shape.empty()) return 0;
  int64_t r = 1;
  for (size_t i = 0; i + 1 < shape.size(); ++i) r *= shape[i];
  return r;
}

int64_t WeightTensor::cols() const { return shape.empty() ? 0 : shape.back(); }

absl::StatusOr<const WeightTensor*> ModelSource::Tensor(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) {
    return absl::NotFoundError(absl::StrCat(path_, ": no tensor named '", name, "'"));
  }
  return &it->second;
}

}  // namespace loom
