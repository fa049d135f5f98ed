// SHA-256 (FIPS 180-4) of byte strings and files, for the checkpoint's provenance records
// (base model and calibration text) and the calibration-cache key.
#ifndef LOOM_MODELS_QUANT_SHA256_H_
#define LOOM_MODELS_QUANT_SHA256_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace loom::quant {

class Sha256 {
 public:
  Sha256();
  void Update(const void* data, size_t n);
  // The digest as 64 lowercase hex characters. The object is spent afterwards.
  std::string HexDigest();

 private:
  void Block(const uint8_t* p);
  std::array<uint32_t, 8> h_;
  std::array<uint8_t, 64> buf_{};
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

std::string Sha256Hex(std::string_view data);

struct FileDigest {
  std::string sha256;  // lowercase hex
  int64_t bytes = 0;
};

// Digest of a regular file, or of a directory: its regular files (not recursive) in
// name order, each contributing its name, a NUL, and its contents; bytes = the sum of the
// file sizes. NotFound if `path` does not exist.
absl::StatusOr<FileDigest> DigestPath(const std::string& path);

}  // namespace loom::quant

#endif  // LOOM_MODELS_QUANT_SHA256_H_
