#include "models/tokenizer/pre_tokenizer.h"

#include <pcre2.h>

#include "absl/strings/str_cat.h"
#include "models/tokenizer/utf8.h"

namespace loom {
namespace {

// Unicode White_Space (what llama.cpp's unicode_set_whitespace holds).
#define LOOM_WS "\\t-\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"

}  // namespace

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
const char* const kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" LOOM_WS "\\p{L}\\p{N}]+"
    "|[" LOOM_WS "]+(?![^" LOOM_WS "])|[" LOOM_WS "]+";

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  bool jit = false;
};

PreTokenizer::~PreTokenizer() {
  for (Compiled* c : regexes_) {
    pcre2_code_free(c->code);
    delete c;
  }
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::FromPatterns(
    const std::vector<std::string>& patterns) {
  std::unique_ptr<PreTokenizer> pt(new PreTokenizer());
  for (const std::string& p : patterns) {
    int err = 0;
    PCRE2_SIZE err_offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(),
                                     PCRE2_UTF | PCRE2_UCP, &err, &err_offset, nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof(msg));
      return absl::InvalidArgumentError(absl::StrCat("pre-tokenizer regex /", p,
                                                     "/ does not compile at offset ",
                                                     err_offset, ": ",
                                                     reinterpret_cast<const char*>(msg)));
    }
    auto* c = new Compiled{code, pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0};
    pt->regexes_.push_back(c);
  }
  return pt;
}

absl::StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizer::Create(std::string_view name) {
  if (name == "smollm" || name == "starcoder" || name == "refact" || name == "command-r" ||
      name == "codeshell" || name == "exaone" || name == "minerva") {
    return FromPatterns({"\\p{N}", kGpt2Pattern});
  }
  if (name.empty() || name == "default" || name == "gpt2" || name == "mpt" ||
      name == "olmo" || name == "jais") {
    return FromPatterns({kGpt2Pattern});
  }
  return absl::UnimplementedError(
      absl::StrCat("byte-level BPE pre-tokenizer \"", std::string(name), "\" is not supported"));
}

absl::Status PreTokenizer::Split(std::string_view text,
                                 std::vector<std::string_view>* pieces) const {
  pieces->clear();
  if (text.empty()) return absl::OkStatus();
  if (!utf8::IsValid(text)) {
    return absl::InvalidArgumentError("pre-tokenizer input is not well-formed UTF-8");
  }
  std::vector<std::string_view> current{text}, next;
  for (const Compiled* re : regexes_) {
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(re->code, nullptr);
    if (md == nullptr) return absl::ResourceExhaustedError("pcre2 match data");
    next.clear();
    absl::Status status;
    for (std::string_view piece : current) {
      const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
      PCRE2_SIZE start = 0, emitted = 0;
      while (start < piece.size()) {
        int rc = re->jit ? pcre2_jit_match(re->code, subject, piece.size(), start, 0, md,
                                           nullptr)
                         : PCRE2_ERROR_JIT_BADOPTION;
        if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
          // JIT unavailable or out of JIT stack: the interpreter (heap-backed) decides.
          rc = pcre2_match(re->code, subject, piece.size(), start, PCRE2_NO_UTF_CHECK, md,
                           nullptr);
        }
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
          status = absl::InternalError(absl::StrCat("pre-tokenizer regex failed: ", rc));
          break;
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        const PCRE2_SIZE mb = ov[0], me = ov[1];
        if (mb > emitted) next.push_back(piece.substr(emitted, mb - emitted));
        if (me > mb) {
          next.push_back(piece.substr(mb, me - mb));
          emitted = me;
          start = me;
        } else {
          // An empty match (none of our patterns produce one): step one character.
          size_t len = 1;
          utf8::ScanChar(piece.substr(start), &len);
          start += len;
        }
      }
      if (!status.ok()) break;
      if (emitted < piece.size()) next.push_back(piece.substr(emitted));
    }
    pcre2_match_data_free(md);
    if (!status.ok()) return status;
    current.swap(next);
  }
  *pieces = std::move(current);
  return absl::OkStatus();
}

}  // namespace loom
