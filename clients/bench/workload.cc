#include "clients/bench/workload.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace loom::bench {

absl::StatusOr<Workload> ParseWorkload(absl::string_view name) {
  if (name == "identical") return Workload::kIdentical;
  if (name == "distinct") return Workload::kDistinct;
  if (name == "uniform") return Workload::kUniform;
  if (name == "skewed") return Workload::kSkewed;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown workload '", name, "' (identical, distinct, uniform, skewed)"));
}

const char* WorkloadName(Workload w) {
  switch (w) {
    case Workload::kIdentical: return "identical";
    case Workload::kDistinct: return "distinct";
    case Workload::kUniform: return "uniform";
    case Workload::kSkewed: return "skewed";
  }
  return "?";
}

int UniformAdapterCount(int64_t expected_requests, int pool) {
  const int64_t k = std::llround(std::sqrt(static_cast<double>(std::max<int64_t>(0, expected_requests))));
  return static_cast<int>(std::clamp<int64_t>(k, 1, std::max(1, pool)));
}

ZipfDistribution::ZipfDistribution(int n, double alpha) {
  n = std::max(1, n);
  cdf_.resize(n);
  double sum = 0;
  for (int k = 0; k < n; ++k) {
    sum += std::pow(k + 1.0, -alpha);
    cdf_[k] = sum;
  }
  for (double& c : cdf_) c /= sum;
  cdf_.back() = 1.0;
}

int ZipfDistribution::operator()(Rng& rng) const {
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  const auto it = std::upper_bound(cdf_.begin(), cdf_.end(), u);
  return std::min(static_cast<int>(it - cdf_.begin()), size() - 1);
}

double ZipfDistribution::Probability(int k) const {
  if (k < 0 || k >= size()) return 0.0;
  return k == 0 ? cdf_[0] : cdf_[k] - cdf_[k - 1];
}

absl::StatusOr<AdapterPicker> AdapterPicker::Create(Workload workload, int pool,
                                                    int64_t expected_requests,
                                                    double zipf_alpha) {
  if (pool < 1) return absl::InvalidArgumentError("adapter pool must hold at least 1 adapter");
  if (!(zipf_alpha >= 0) || !std::isfinite(zipf_alpha)) {
    return absl::InvalidArgumentError(absl::StrCat("bad zipf alpha ", zipf_alpha));
  }
  int in_use = pool;
  if (workload == Workload::kIdentical) in_use = 1;
  if (workload == Workload::kUniform) in_use = UniformAdapterCount(expected_requests, pool);
  return AdapterPicker(workload, pool, in_use, zipf_alpha);
}

int AdapterPicker::Next(Rng& rng) {
  switch (workload_) {
    case Workload::kIdentical:
      return 0;
    case Workload::kDistinct:
      return static_cast<int>(counter_++ % pool_);
    case Workload::kUniform:
      return std::uniform_int_distribution<int>(0, in_use_ - 1)(rng);
    case Workload::kSkewed:
      return zipf_(rng);
  }
  return 0;
}

absl::StatusOr<LengthDistribution> LengthDistribution::Parse(absl::string_view spec) {
  std::vector<absl::string_view> parts = absl::StrSplit(spec, ':');
  LengthDistribution d;
  auto bad = [&spec]() {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad length distribution '", spec, "' (N, uniform:A:B or exp:MEAN:MAX, all >= 1)"));
  };
  if (parts.size() == 1) {
    if (!absl::SimpleAtoi(parts[0], &d.a_) || d.a_ < 1) return bad();
    d.kind_ = Kind::kFixed;
    d.b_ = d.a_;
    d.mean_ = d.a_;
    return d;
  }
  if (parts.size() == 3 && parts[0] == "uniform") {
    if (!absl::SimpleAtoi(parts[1], &d.a_) || !absl::SimpleAtoi(parts[2], &d.b_) || d.a_ < 1 ||
        d.b_ < d.a_) {
      return bad();
    }
    d.kind_ = Kind::kUniform;
    d.mean_ = (d.a_ + d.b_) / 2.0;
    return d;
  }
  if (parts.size() == 3 && parts[0] == "exp") {
    if (!absl::SimpleAtod(parts[1], &d.mean_) || !absl::SimpleAtoi(parts[2], &d.b_) ||
        !(d.mean_ >= 1) || d.b_ < 1) {
      return bad();
    }
    d.kind_ = Kind::kExp;
    d.a_ = 1;
    return d;
  }
  return bad();
}

int LengthDistribution::Sample(Rng& rng) const {
  switch (kind_) {
    case Kind::kFixed:
      return a_;
    case Kind::kUniform:
      return std::uniform_int_distribution<int>(a_, b_)(rng);
    case Kind::kExp: {
      if (mean_ <= 1) return 1;
      const double x = 1.0 + std::exponential_distribution<double>(1.0 / (mean_ - 1.0))(rng);
      return static_cast<int>(std::clamp<double>(std::floor(x), 1, b_));
    }
  }
  return a_;
}

double LengthDistribution::Mean() const { return mean_; }

std::string LengthDistribution::ToString() const {
  switch (kind_) {
    case Kind::kFixed: return absl::StrCat(a_);
    case Kind::kUniform: return absl::StrCat("uniform:", a_, ":", b_);
    case Kind::kExp: return absl::StrCat("exp:", mean_, ":", b_);
  }
  return "";
}

std::string MakeWordPrompt(int words, Rng& rng) {
  static const char* kWords[] = {
      " the", " of", " and", " to", " in", " a", " is", " that", " for", " it",
      " as", " was", " with", " be", " by", " on", " not", " he", " this", " are",
      " or", " his", " from", " at", " which", " but", " have", " an", " had", " they",
      " you", " were", " their", " one", " all", " we", " can", " her", " has", " there",
      " been", " if", " more", " when", " will", " would", " who", " so", " no", " time"};
  constexpr int kCount = sizeof(kWords) / sizeof(kWords[0]);
  std::uniform_int_distribution<int> pick(0, kCount - 1);
  std::string out;
  out.reserve(static_cast<size_t>(std::max(0, words)) * 5);
  for (int i = 0; i < words; ++i) out += kWords[pick(rng)];
  return out;
}

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  p = std::clamp(p, 0.0, 100.0);
  const double rank = p / 100.0 * (values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  const double frac = rank - lo;
  return values[lo] + (values[hi] - values[lo]) * frac;
}

}  // namespace loom::bench
