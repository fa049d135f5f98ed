#include "models/quant/calibration_cache.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace loom::quant {
namespace {

constexpr char kMagic[8] = {'L', 'O', 'O', 'M', 'C', 'A', 'L', '1'};

template <typename T>
void Put(std::ofstream& f, const T& v) {
  f.write(reinterpret_cast<const char*>(&v), sizeof(T));
}

template <typename T>
bool Get(std::ifstream& f, T* v) {
  return static_cast<bool>(f.read(reinterpret_cast<char*>(v), sizeof(T)));
}

}  // namespace

std::string CalibrationCacheKey(const std::string& model_sha256, const std::string& text_sha256,
                                int sequences, int seq_len, bool hessian) {
  return absl::StrCat("model=", model_sha256, ";text=", text_sha256, ";sequences=", sequences,
                      ";seq_len=", seq_len, ";hessian=", hessian ? 1 : 0);
}

absl::Status SaveCalibrationStats(const std::string& path, const std::string& key,
                                  const CalibrationStats& s) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return absl::PermissionDeniedError("cannot create " + tmp);
    f.write(kMagic, 8);
    Put(f, static_cast<uint32_t>(key.size()));
    f.write(key.data(), key.size());
    Put(f, static_cast<int64_t>(s.tokens));
    Put(f, static_cast<uint8_t>(s.has_hessian ? 1 : 0));
    Put(f, static_cast<int32_t>(s.layers.size()));
    std::vector<float> h32;
    for (const auto& layer : s.layers) {
      for (const ActivationStats& a : layer) {
        Put(f, static_cast<int32_t>(a.k));
        f.write(reinterpret_cast<const char*>(a.energy.data()), a.energy.size() * sizeof(double));
        if (s.has_hessian) {
          h32.assign(a.hessian.begin(), a.hessian.end());
          f.write(reinterpret_cast<const char*>(h32.data()), h32.size() * sizeof(float));
        }
      }
    }
    f.close();
    if (!f) return absl::DataLossError("cannot write " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::PermissionDeniedError("cannot rename " + tmp + " to " + path);
  }
  return absl::OkStatus();
}

absl::StatusOr<CalibrationStats> LoadCalibrationStats(const std::string& path,
                                                      const std::string& key) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError("no calibration cache at " + path);
  auto bad = [&](const std::string& what) {
    return absl::DataLossError(absl::StrCat("calibration cache ", path, ": ", what));
  };
  char magic[8];
  uint32_t key_len = 0;
  if (!f.read(magic, 8) || std::memcmp(magic, kMagic, 8) != 0) return bad("bad magic");
  if (!Get(f, &key_len) || key_len > (1u << 16)) return bad("bad key length");
  std::string got(key_len, '\0');
  if (!f.read(got.data(), key_len)) return bad("truncated key");
  if (got != key) {
    return absl::FailedPreconditionError(
        absl::StrCat("calibration cache ", path, " is for '", got, "', not '", key, "'"));
  }
  CalibrationStats s;
  int64_t tokens = 0;
  uint8_t has_h = 0;
  int32_t n_layers = 0;
  if (!Get(f, &tokens) || !Get(f, &has_h) || !Get(f, &n_layers) || n_layers < 0 ||
      n_layers > 100000) {
    return bad("truncated header");
  }
  s.tokens = tokens;
  s.has_hessian = has_h != 0;
  s.layers.resize(n_layers);
  std::vector<float> h32;
  for (auto& layer : s.layers) {
    for (ActivationStats& a : layer) {
      int32_t k = 0;
      if (!Get(f, &k) || k <= 0 || k > (1 << 20)) return bad("bad width");
      a.k = k;
      a.energy.resize(k);
      if (!f.read(reinterpret_cast<char*>(a.energy.data()), k * sizeof(double))) {
        return bad("truncated energies");
      }
      if (s.has_hessian) {
        h32.resize(static_cast<size_t>(k) * k);
        if (!f.read(reinterpret_cast<char*>(h32.data()), h32.size() * sizeof(float))) {
          return bad("truncated Hessian");
        }
        a.hessian.assign(h32.begin(), h32.end());
      }
    }
  }
  if (f.peek() != std::char_traits<char>::eof()) return bad("trailing bytes");
  return s;
}

}  // namespace loom::quant
