#include "models/sampling/sampling_options.h"

#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace loom {
namespace {

using ::testing::HasSubstr;

TEST(SamplingOptionsTest, DefaultsAreValid) { EXPECT_TRUE(SamplingOptions().Validate().ok()); }

TEST(SamplingOptionsTest, BoundaryValuesAreValid) {
  SamplingOptions o;
  o.temperature = 100.0f;
  o.top_p = 1.0f;
  o.min_p = 1.0f;
  o.top_k = 1;
  o.repetition_penalty = 1e-3f;
  o.frequency_penalty = -2.0f;
  o.presence_penalty = 2.0f;
  o.penalty_last_n = -1;
  EXPECT_TRUE(o.Validate().ok()) << o.Validate();
}

// Each case breaks one field; the message must name the field and its value.
struct BadCase {
  const char* field;
  const char* value_text;
  void (*mutate)(SamplingOptions*);
};

TEST(SamplingOptionsTest, MessagesNameFieldAndValue) {
  const BadCase cases[] = {
      {"temperature", "-0.5", [](SamplingOptions* o) { o->temperature = -0.5f; }},
      {"temperature", "101", [](SamplingOptions* o) { o->temperature = 101.0f; }},
      {"temperature", "nan",
       [](SamplingOptions* o) { o->temperature = std::numeric_limits<float>::quiet_NaN(); }},
      {"top_k", "-1", [](SamplingOptions* o) { o->top_k = -1; }},
      {"top_p", "0", [](SamplingOptions* o) { o->top_p = 0.0f; }},
      {"top_p", "1.5", [](SamplingOptions* o) { o->top_p = 1.5f; }},
      {"min_p", "-0.25", [](SamplingOptions* o) { o->min_p = -0.25f; }},
      {"min_p", "2", [](SamplingOptions* o) { o->min_p = 2.0f; }},
      {"repetition_penalty", "0", [](SamplingOptions* o) { o->repetition_penalty = 0.0f; }},
      {"repetition_penalty", "inf",
       [](SamplingOptions* o) { o->repetition_penalty = std::numeric_limits<float>::infinity(); }},
      {"frequency_penalty", "-inf",
       [](SamplingOptions* o) { o->frequency_penalty = -std::numeric_limits<float>::infinity(); }},
      {"presence_penalty", "nan",
       [](SamplingOptions* o) { o->presence_penalty = std::numeric_limits<float>::quiet_NaN(); }},
      {"penalty_last_n", "-2", [](SamplingOptions* o) { o->penalty_last_n = -2; }},
  };
  for (const BadCase& c : cases) {
    SamplingOptions o;
    c.mutate(&o);
    const absl::Status status = o.Validate();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_THAT(std::string(status.message()), HasSubstr(std::string(c.field) + " = " + c.value_text))
        << status;
  }
}

}  // namespace
}  // namespace loom
