#include "scheduler/sim/workload.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace loom {
namespace {

constexpr double kPi = 3.14159265358979323846;

// Uniform in (0, 1) from a 64-bit engine whose output is fully specified by the standard
// (mt19937_64), so the stream is the same on every platform.
class Stream {
 public:
  explicit Stream(uint64_t seed) : engine_(seed) {}
  double Uniform() { return ((engine_() >> 11) + 0.5) * (1.0 / 9007199254740992.0); }
  double Exponential() { return -std::log(Uniform()); }
  double Normal() {  // Box-Muller, one value per call
    const double u1 = Uniform(), u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * kPi * u2);
  }

 private:
  std::mt19937_64 engine_;
};

int SampleLength(const LengthDistribution& d, Stream& s) {
  if (d.shape == LengthDistribution::kFixed) return d.min;
  if (d.shape == LengthDistribution::kUniform) {
    const int span = d.max - d.min + 1;
    return d.min + std::min(static_cast<int>(s.Uniform() * span), span - 1);
  }
  const double mu = std::log(d.mean) - 0.5 * d.sigma * d.sigma;
  const double x = std::exp(mu + d.sigma * s.Normal());
  return std::clamp(static_cast<int>(std::lround(x)), d.min, d.max);
}

absl::Status Validate(const LengthDistribution& d, const char* what) {
  if (d.min < 1 || d.max < d.min || !(d.mean > 0) || !(d.sigma >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " length distribution invalid: mean ", d.mean, " sigma ", d.sigma, " range [",
        d.min, ", ", d.max, "]"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<AdapterWorkload> ParseAdapterWorkload(std::string_view name) {
  if (name == "distinct") return AdapterWorkload::kDistinct;
  if (name == "uniform") return AdapterWorkload::kUniform;
  if (name == "skewed") return AdapterWorkload::kSkewed;
  if (name == "identical") return AdapterWorkload::kIdentical;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown workload '", std::string(name),
      "' (expected distinct, uniform, skewed, identical)"));
}

std::string AdapterWorkloadName(AdapterWorkload w) {
  switch (w) {
    case AdapterWorkload::kDistinct: return "distinct";
    case AdapterWorkload::kUniform: return "uniform";
    case AdapterWorkload::kSkewed: return "skewed";
    case AdapterWorkload::kIdentical: return "identical";
  }
  return "?";
}

absl::StatusOr<LengthDistribution> ParseLengthDistribution(std::string_view spec) {
  const std::vector<std::string> parts =
      absl::StrSplit(absl::string_view(spec.data(), spec.size()), ':');
  auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad length distribution '", std::string(spec),
        "' (N, uniform:A:B or lognormal:MEAN:SIGMA:MIN:MAX, lengths >= 1)"));
  };
  LengthDistribution d;
  if (parts.size() == 1) {
    if (!absl::SimpleAtoi(parts[0], &d.min) || d.min < 1) return bad();
    d.max = d.min;
    d.mean = d.min;
    d.sigma = 0;
    d.shape = LengthDistribution::kFixed;
    return d;
  }
  if (parts.size() == 3 && parts[0] == "uniform") {
    if (!absl::SimpleAtoi(parts[1], &d.min) || !absl::SimpleAtoi(parts[2], &d.max) ||
        d.min < 1 || d.max < d.min) {
      return bad();
    }
    d.mean = (d.min + d.max) / 2.0;
    d.sigma = 0;
    d.shape = LengthDistribution::kUniform;
    return d;
  }
  if (parts.size() == 5 && parts[0] == "lognormal") {
    if (!absl::SimpleAtod(parts[1], &d.mean) || !absl::SimpleAtod(parts[2], &d.sigma) ||
        !absl::SimpleAtoi(parts[3], &d.min) || !absl::SimpleAtoi(parts[4], &d.max) ||
        d.min < 1 || d.max < d.min || !(d.mean > 0) || !(d.sigma >= 0)) {
      return bad();
    }
    return d;
  }
  return bad();
}

std::string AdapterName(int adapter) { return absl::StrCat("lora-", adapter); }

absl::StatusOr<std::vector<SimRequest>> GenerateWorkload(const WorkloadOptions& o) {
  if (o.num_requests < 1 || !(o.arrival_rate > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("need num_requests >= 1 and rate > 0, got ",
                                                   o.num_requests, " and ", o.arrival_rate));
  }
  if (!(o.zipf_alpha > 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("zipf_alpha must be > 1, got ", o.zipf_alpha));
  }
  if (!(o.rate_amplitude >= 0 && o.rate_amplitude <= 1) ||
      (o.rate_amplitude > 0 && !(o.rate_period_s > 0))) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rate modulation needs amplitude in [0, 1] and period > 0, got ", o.rate_amplitude,
        " and ", o.rate_period_s));
  }
  if (auto s = Validate(o.prompt, "prompt"); !s.ok()) return s;
  if (auto s = Validate(o.output, "output"); !s.ok()) return s;

  const int n = o.num_requests;
  Stream arrivals(o.seed * 3 + 0), lengths(o.seed * 3 + 1), adapters(o.seed * 3 + 2);
  std::vector<double> zipf_cdf;
  if (o.adapters == AdapterWorkload::kSkewed) {
    zipf_cdf.resize(n);
    double sum = 0;
    for (int k = 0; k < n; ++k) zipf_cdf[k] = (sum += std::pow(k + 1.0, -o.zipf_alpha));
    for (double& c : zipf_cdf) c /= sum;
  }
  const int uniform_count = static_cast<int>(std::ceil(std::sqrt(static_cast<double>(n))));

  std::vector<SimRequest> out(n);
  double t = 0;
  for (int i = 0; i < n; ++i) {
    SimRequest& r = out[i];
    r.id = static_cast<uint64_t>(i);
    if (o.rate_amplitude > 0) {
      // Thinning (Lewis-Shedler): candidates at the peak rate, each kept with probability
      // rate(t) / peak.
      const double peak = o.arrival_rate * (1 + o.rate_amplitude);
      for (;;) {
        t += arrivals.Exponential() / peak;
        const double rate =
            o.arrival_rate * (1 + o.rate_amplitude * std::sin(2 * kPi * t / o.rate_period_s));
        if (arrivals.Uniform() * peak < rate) break;
      }
    } else {
      t += arrivals.Exponential() / o.arrival_rate;
    }
    r.arrival_s = t;
    r.prompt_tokens = SampleLength(o.prompt, lengths);
    r.output_tokens = SampleLength(o.output, lengths);
    const double u = adapters.Uniform();
    switch (o.adapters) {
      case AdapterWorkload::kDistinct: r.adapter = i; break;
      case AdapterWorkload::kIdentical: r.adapter = 0; break;
      case AdapterWorkload::kUniform:
        r.adapter = std::min(static_cast<int>(u * uniform_count), uniform_count - 1);
        break;
      case AdapterWorkload::kSkewed:
        r.adapter = static_cast<int>(
            std::lower_bound(zipf_cdf.begin(), zipf_cdf.end() - 1, u) - zipf_cdf.begin());
        break;
    }
  }
  return out;
}

}  // namespace loom
