// Test helper: parses the Prometheus text exposition into series -> value, where a series
// key is the name followed by its labels sorted by name, e.g.
//   loom_requests_total{adapter="a",code="OK"}
// Only what the tests need: no escapes inside label values, no timestamps.
#ifndef LOOM_SERVER_METRICS_EXPOSITION_PARSER_H_
#define LOOM_SERVER_METRICS_EXPOSITION_PARSER_H_

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace loom {
namespace testing_metrics {

struct Exposition {
  std::map<std::string, double> series;            // key -> value
  std::map<std::string, std::string> types;        // family -> counter|gauge|histogram
  std::map<std::string, std::string> help;         // family -> help text

  bool Has(const std::string& key) const { return series.count(key) > 0; }
  double Get(const std::string& key) const {
    auto it = series.find(key);
    return it == series.end() ? -1e300 : it->second;
  }
  // Distinct values of `label` over series of metric `name`.
  std::vector<std::string> LabelValues(const std::string& name, const std::string& label) const {
    std::vector<std::string> out;
    const std::string prefix = name + "{";
    const std::string needle = label + "=\"";
    for (const auto& [key, value] : series) {
      if (key.compare(0, prefix.size(), prefix) != 0) continue;
      size_t p = key.find(needle);
      if (p == std::string::npos) continue;
      p += needle.size();
      std::string v = key.substr(p, key.find('"', p) - p);
      if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
    }
    std::sort(out.begin(), out.end());
    return out;
  }
};

inline Exposition ParseExposition(absl::string_view text) {
  Exposition e;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    if (absl::ConsumePrefix(&line, "# TYPE ")) {
      std::pair<std::string, std::string> kv = absl::StrSplit(line, ' ');
      e.types[kv.first] = kv.second;
      continue;
    }
    if (absl::ConsumePrefix(&line, "# HELP ")) {
      std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits(' ', 1));
      e.help[kv.first] = kv.second;
      continue;
    }
    if (absl::StartsWith(line, "#")) continue;
    const size_t space = line.rfind(' ');
    std::string key(line.substr(0, space));
    const double value = std::strtod(std::string(line.substr(space + 1)).c_str(), nullptr);
    const size_t brace = key.find('{');
    if (brace != std::string::npos) {
      std::string name = key.substr(0, brace);
      std::string inner = key.substr(brace + 1, key.size() - brace - 2);
      std::vector<std::string> labels = absl::StrSplit(inner, ',', absl::SkipEmpty());
      std::sort(labels.begin(), labels.end());
      key = name + "{" + absl::StrJoin(labels, ",") + "}";
    }
    e.series[key] = value;
  }
  return e;
}

}  // namespace testing_metrics
}  // namespace loom

#endif  // LOOM_SERVER_METRICS_EXPOSITION_PARSER_H_
