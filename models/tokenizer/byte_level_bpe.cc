#include "models/tokenizer/byte_level_bpe.h"

#include <queue>

#include "absl/strings/str_cat.h"
#include "models/tokenizer/utf8.h"

namespace loom {
namespace {

struct ByteMaps {
  std::array<std::string, 256> to_unicode;
  absl::flat_hash_map<uint32_t, uint8_t> from_unicode;  // code point -> byte
};

const ByteMaps& Maps() {
  static const ByteMaps* maps = [] {
    auto* m = new ByteMaps();
    int extra = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) ||
                             (b >= 0xAE && b <= 0xFF);
      const uint32_t cp = printable ? b : 256 + extra++;
      utf8::AppendCodepoint(cp, &m->to_unicode[b]);
      m->from_unicode[cp] = static_cast<uint8_t>(b);
    }
    return m;
  }();
  return *maps;
}

}  // namespace

const std::string& ByteToUnicode(uint8_t b) { return Maps().to_unicode[b]; }

std::string ByteLevelDecode(std::string_view text) {
  const ByteMaps& maps = Maps();
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    size_t len = 1;
    uint32_t cp = 0;
    if (utf8::ScanChar(text.substr(pos), &len, &cp) == utf8::Scan::kValid) {
      auto it = maps.from_unicode.find(cp);
      if (it != maps.from_unicode.end()) {
        out.push_back(static_cast<char>(it->second));
      } else {
        out.append(text.data() + pos, len);
      }
    } else {
      out.append(text.data() + pos, len);
    }
    pos += len;
  }
  return out;
}

absl::StatusOr<std::unique_ptr<ByteLevelBpe>> ByteLevelBpe::Create(const Vocabulary& vocab) {
  if (!vocab.token_types.empty() && vocab.token_types.size() != vocab.tokens.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "vocabulary has ", vocab.tokens.size(), " tokens but ", vocab.token_types.size(),
        " token types"));
  }
  auto pre = PreTokenizer::Create(vocab.pre);
  if (!pre.ok()) return pre.status();
  std::unique_ptr<ByteLevelBpe> t(new ByteLevelBpe(vocab));
  t->pre_ = std::move(*pre);

  const int32_t n = static_cast<int32_t>(vocab.tokens.size());
  absl::flat_hash_map<std::string, int32_t> symbol_of;
  auto intern = [&](std::string_view s) -> int32_t {
    auto [it, inserted] =
        symbol_of.emplace(std::string(s), static_cast<int32_t>(t->symbols_.size()));
    if (inserted) {
      t->symbols_.emplace_back(s);
      t->symbol_token_.push_back(-1);
    }
    return it->second;
  };
  t->token_bytes_.resize(n);
  for (int32_t id = 0; id < n; ++id) {
    // Like llama.cpp's token_to_id map, a duplicated text resolves to its last id.
    t->symbol_token_[intern(vocab.tokens[id])] = id;
    const TokenType type = t->types_[id];
    t->token_bytes_[id] = (type == TokenType::kControl || type == TokenType::kUserDefined)
                              ? vocab.tokens[id]
                              : ByteLevelDecode(vocab.tokens[id]);
  }
  for (int b = 0; b < 256; ++b) {
    t->byte_symbol_[b] = intern(ByteToUnicode(static_cast<uint8_t>(b)));
    t->single_char_token_[b] = t->symbol_token_[intern(std::string(1, static_cast<char>(b)))];
  }
  t->merges_.reserve(vocab.merges.size());
  for (size_t rank = 0; rank < vocab.merges.size(); ++rank) {
    const std::string& m = vocab.merges[rank];
    const size_t space = m.find(' ', 1);
    if (space == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("merge ", rank, " (\"", m, "\") has no separating space"));
    }
    const std::string_view left(m.data(), space);
    const std::string_view right(m.data() + space + 1, m.size() - space - 1);
    const int32_t l = intern(left), r = intern(right);
    const int32_t result = intern(std::string(left) + std::string(right));
    // The first occurrence of a pair keeps its rank (llama.cpp's bpe_ranks.emplace).
    t->merges_.emplace(PairKey(l, r), Merge{static_cast<int32_t>(rank), result});
  }
  return t;
}

absl::Status ByteLevelBpe::EncodeFragment(std::string_view text,
                                          std::vector<int32_t>* out) const {
  std::vector<std::string_view> pieces;
  absl::Status s = pre_->Split(text, &pieces);
  if (!s.ok()) return s;
  for (std::string_view piece : pieces) EncodeWord(piece, out);
  return absl::OkStatus();
}

void ByteLevelBpe::EncodeWord(std::string_view word, std::vector<int32_t>* out) const {
  {
    absl::MutexLock lock(&cache_mu_);
    auto it = cache_.find(absl::string_view(word.data(), word.size()));
    if (it != cache_.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  // Doubly linked list of symbols, one per byte to start with.
  struct Sym {
    int32_t id;
    int32_t prev, next;  // indices, -1 at the ends
    bool alive;
  };
  const int32_t n = static_cast<int32_t>(word.size());
  std::vector<Sym> syms(n);
  for (int32_t i = 0; i < n; ++i) {
    syms[i] = {byte_symbol_[static_cast<uint8_t>(word[i])], i - 1, i + 1 < n ? i + 1 : -1,
               true};
  }
  struct Candidate {
    int32_t rank, left, right, left_id, right_id;
    bool operator<(const Candidate& o) const {  // inverted: the queue pops the smallest
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::priority_queue<Candidate> queue;
  auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    auto it = merges_.find(PairKey(syms[left].id, syms[right].id));
    if (it == merges_.end()) return;
    queue.push({it->second.rank, left, right, syms[left].id, syms[right].id});
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i, i + 1);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Sym& l = syms[c.left];
    Sym& r = syms[c.right];
    // Stale when either side was merged away or changed since the candidate was made.
    if (!l.alive || !r.alive || l.next != c.right || l.id != c.left_id ||
        r.id != c.right_id) {
      continue;
    }
    l.id = merges_.find(PairKey(c.left_id, c.right_id))->second.result;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = c.left;
    r.alive = false;
    consider(l.prev, c.left);
    consider(c.left, l.next);
  }
  std::vector<int32_t> ids;
  for (int32_t i = 0; i >= 0 && i < n; i = syms[i].next) {
    const int32_t tok = symbol_token_[syms[i].id];
    if (tok >= 0) {
      ids.push_back(tok);
    } else {
      for (char b : symbols_[syms[i].id]) {
        const int32_t single = single_char_token_[static_cast<uint8_t>(b)];
        if (single >= 0) ids.push_back(single);
      }
    }
  }
  out->insert(out->end(), ids.begin(), ids.end());
  absl::MutexLock lock(&cache_mu_);
  if (cache_.size() >= kCacheLimit) cache_.clear();
  cache_.emplace(std::string(word), std::move(ids));
}

}  // namespace loom
