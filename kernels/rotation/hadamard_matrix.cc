#include "kernels/rotation/hadamard_matrix.h"

#include "absl/strings/str_cat.h"

namespace loom::kernels {
namespace {

struct PaleyOrder {
  int order;
  int q;       // the prime
  bool second; // Paley II (order 2 (q + 1)) or Paley I (order q + 1)
};

// Orders 4 mod 8 (so no two differ by a power of two) built from a prime q.
constexpr PaleyOrder kPaley[] = {
    {12, 11, false},  {20, 19, false},  {28, 13, true},   {36, 17, true},
    {44, 43, false},  {60, 59, false},  {68, 67, false},  {76, 37, true},
    {84, 83, false},  {108, 107, false}, {124, 61, true}, {132, 131, false},
    {140, 139, false},
};

bool IsPowerOfTwo(int n) { return n >= 1 && (n & (n - 1)) == 0; }

// Quadratic character of a mod the odd prime q: 0, +1 (a residue) or -1.
int Chi(int a, int q) {
  a %= q;
  if (a < 0) a += q;
  if (a == 0) return 0;
  int64_t r = 1, b = a;
  for (int e = (q - 1) / 2; e > 0; e >>= 1) {
    if (e & 1) r = r * b % q;
    b = b * b % q;
  }
  return r == 1 ? 1 : -1;
}

std::vector<int8_t> Sylvester(int n) {
  std::vector<int8_t> h(static_cast<size_t>(n) * n);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) h[static_cast<size_t>(i) * n + j] = __builtin_popcount(i & j) & 1 ? -1 : 1;
  }
  return h;
}

std::vector<int8_t> PaleyI(int q) {
  const int n = q + 1;
  std::vector<int8_t> h(static_cast<size_t>(n) * n);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      int s;
      if (i == 0) {
        s = j == 0 ? 0 : 1;
      } else if (j == 0) {
        s = -1;
      } else {
        s = Chi(j - i, q);
      }
      h[static_cast<size_t>(i) * n + j] = static_cast<int8_t>(s + (i == j ? 1 : 0));
    }
  }
  return h;
}

std::vector<int8_t> PaleyII(int q) {
  const int m = q + 1, n = 2 * m;
  std::vector<int8_t> h(static_cast<size_t>(n) * n);
  for (int i = 0; i < m; ++i) {
    for (int j = 0; j < m; ++j) {
      const int c = (i == 0 && j == 0) ? 0 : (i == 0 || j == 0) ? 1 : Chi(j - i, q);
      // C ⊗ [[1, 1], [1, -1]] + (i == j) ⊗ [[1, -1], [-1, -1]]
      const int d = i == j ? 1 : 0;
      const int block[2][2] = {{c + d, c - d}, {c - d, -c - d}};
      for (int a = 0; a < 2; ++a) {
        for (int b = 0; b < 2; ++b) {
          h[static_cast<size_t>(2 * i + a) * n + 2 * j + b] = static_cast<int8_t>(block[a][b]);
        }
      }
    }
  }
  return h;
}

}  // namespace

const std::vector<int>& HadamardBaseOrders() {
  static const std::vector<int>* orders = [] {
    auto* v = new std::vector<int>;
    for (const PaleyOrder& p : kPaley) v->push_back(p.order);
    return v;
  }();
  return *orders;
}

absl::StatusOr<int> HadamardBaseOrder(int n) {
  if (IsPowerOfTwo(n)) return 1;
  for (const PaleyOrder& p : kPaley) {
    if (n % p.order == 0 && IsPowerOfTwo(n / p.order)) return p.order;
  }
  return absl::UnimplementedError(absl::StrCat(
      "no Hadamard matrix of order ", n, " is built here: the width must be K * 2^m with K "
      "1 or one of 12, 20, 28, 36, 44, 60, 68, 76, 84, 108, 124, 132, 140"));
}

absl::StatusOr<std::vector<int8_t>> HadamardMatrix(int order) {
  if (IsPowerOfTwo(order)) return Sylvester(order);
  for (const PaleyOrder& p : kPaley) {
    if (p.order == order) return p.second ? PaleyII(p.q) : PaleyI(p.q);
  }
  return absl::UnimplementedError(
      absl::StrCat("no Hadamard matrix of order ", order, " is built here"));
}

}  // namespace loom::kernels
