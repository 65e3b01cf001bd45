#include "tune/tunables.h"

#include <gtest/gtest.h>

#include "task/expression.h"

namespace kda::tune {
namespace {

using Span = std::pair<int64_t, int64_t>;

task::Definition rms_def() {
  task::Definition d;
  d.name = "rms";
  d.axes = {{"batch_size", task::AxisSpec::Kind::kVar, 0, ""},
            {"hidden_size", task::AxisSpec::Kind::kVar, 0, ""},
            {"heads", task::AxisSpec::Kind::kConst, 8, ""}};
  return d;
}

Result<Tunables> parse(const std::string& text) {
  return parse_tunables(text, "sol/tunables.toml", rms_def(), "kernel.cc::run", {"kernel.cc", "other.cc", "util.h"});
}

void expect_error(const std::string& text, const std::string& needle, int line) {
  auto t = parse(text);
  ASSERT_FALSE(t.ok()) << text;
  EXPECT_EQ(t.status().kind(), ErrorKind::kBadInput);
  EXPECT_NE(t.status().message().find(needle), std::string::npos) << t.status().message();
  EXPECT_NE(t.status().message().find("sol/tunables.toml:" + std::to_string(line) + ":"), std::string::npos)
      << t.status().message();
}

TEST(Expression, ComparisonsLogicAndModulo) {
  auto e = task::Expression::parse("THREADS % 32 == 0 && BLOCK <= hidden_size || !FORCE");
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(*e->evaluate({{"THREADS", 64}, {"BLOCK", 128}, {"hidden_size", 256}, {"FORCE", 1}}), 1.0);
  EXPECT_EQ(*e->evaluate({{"THREADS", 48}, {"BLOCK", 128}, {"hidden_size", 256}, {"FORCE", 1}}), 0.0);
  EXPECT_EQ(*e->evaluate({{"THREADS", 48}, {"BLOCK", 128}, {"hidden_size", 256}, {"FORCE", 0}}), 1.0);
  EXPECT_EQ(*task::Expression::parse("1 + 2 * 3 < 8")->evaluate({}), 1.0);  // precedence: (1 + 6) < 8
  EXPECT_EQ(*task::Expression::parse("7 % 4 != 3")->evaluate({}), 0.0);
  EXPECT_EQ(*task::Expression::parse("2 >= 3 || 3 > 2")->evaluate({}), 1.0);
  EXPECT_FALSE(task::Expression::parse("5 % 0")->evaluate({}).ok());
  EXPECT_FALSE(task::Expression::parse("a < < b").ok());
  EXPECT_FALSE(task::Expression::parse("a & b").ok());
}

constexpr const char* kGood = R"(# rows per block and unroll
constraints = ["UNROLL % 2 == 0 || UNROLL == 1", "ROWS <= batch_size"]

[parameters.ROWS]
values = [1, 2, 4]
macro = "KDA_ROWS"

[parameters.UNROLL]
range = { min = 1, max = 4, step = 1 }
bind = "template"

[parameters.ACC]
values = ["float", "double"]

[[variant]]
name = "onepass"

[[variant]]
name = "twopass"
entry_point = "other.cc::run2"
sources = ["other.cc", "util.h"]
parameters = ["ROWS"]

[[regime]]
name = "small"
hidden_size = [1, 1024]

[[regime]]
name = "one"
batch_size = 1
)";

TEST(Tunables, ParsesEverySection) {
  auto t = parse(kGood);
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->parameters.size(), 3u);
  EXPECT_EQ(t->parameters[0].name, "ROWS");  // file order, not key order
  EXPECT_EQ(t->parameters[0].macro, "KDA_ROWS");
  EXPECT_EQ(t->parameters[0].line, 4);
  EXPECT_EQ(t->parameters[1].values.size(), 4u);
  EXPECT_EQ(t->parameters[1].binding, Binding::kTemplate);
  EXPECT_EQ(t->parameters[2].values[1], "double");
  ASSERT_EQ(t->constraints.size(), 2u);
  EXPECT_FALSE(t->constraints[0].uses_axes);
  EXPECT_TRUE(t->constraints[1].uses_axes);
  ASSERT_EQ(t->variants.size(), 2u);
  EXPECT_EQ(t->variants[0].entry_point, "kernel.cc::run");
  EXPECT_EQ(t->variants[1].entry_point, "other.cc::run2");
  ASSERT_EQ(t->regimes.size(), 2u);
  EXPECT_EQ(t->regimes[0].ranges.at("hidden_size"), (Span{1, 1024}));
  EXPECT_EQ(t->regimes[1].ranges.at("batch_size"), (Span{1, 1}));
}

TEST(Tunables, EnumeratesUnderConstraints) {
  auto t = parse(kGood);
  ASSERT_TRUE(t.ok());
  auto cs = enumerate_configs(*t);
  ASSERT_TRUE(cs.ok()) << cs.status().message();
  // onepass: 3 ROWS x {1,2,4} UNROLL (3 is odd, excluded) x 2 ACC = 18; twopass varies ROWS only: 3.
  EXPECT_EQ(cs->size(), 21u);
  EXPECT_EQ((*cs)[0].variant, "onepass");
  EXPECT_EQ((*cs)[0].params.at("ROWS"), 1);
  EXPECT_EQ((*cs)[0].params.at("UNROLL"), 1);
  EXPECT_EQ((*cs)[0].params.at("ACC"), "float");
  std::set<std::string> ids;
  for (const auto& c : *cs) {
    EXPECT_NE(all_values(*t, c).at("UNROLL"), 3);
    ids.insert(c.id());
    if (c.variant == "twopass") {
      EXPECT_EQ(c.params.count("UNROLL"), 0u);  // not varied: left out, first value
      EXPECT_EQ(all_values(*t, c).at("UNROLL"), 1);
      EXPECT_EQ(all_values(*t, c).at("ACC"), "float");
    }
  }
  EXPECT_EQ(ids.size(), cs->size());  // ids are distinct
  // Axis constraints per workload: ROWS <= batch_size.
  const Config& rows4 = *std::find_if(cs->begin(), cs->end(), [](const Config& c) { return c.params.at("ROWS") == 4; });
  EXPECT_FALSE(*applies_to(*t, rows4, {{"batch_size", 2}, {"hidden_size", 64}, {"heads", 8}}));
  EXPECT_TRUE(*applies_to(*t, rows4, {{"batch_size", 4}, {"hidden_size", 64}, {"heads", 8}}));
  // Round trip.
  auto back = Config::from_json(rows4.to_json());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->id(), rows4.id());
  EXPECT_EQ(macro_text(true), "1");
  EXPECT_EQ(macro_text(nlohmann::json(12)), "12");
}

TEST(Tunables, NoVariantsMeansTheSolutionsEntry) {
  auto t = parse("[parameters.A]\nvalues = [1, 2]\n");
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->variants.size(), 1u);
  EXPECT_EQ(t->variants[0].name, "default");
  EXPECT_EQ(t->variants[0].entry_point, "kernel.cc::run");
  auto cs = enumerate_configs(*t);
  ASSERT_TRUE(cs.ok());
  EXPECT_EQ(cs->size(), 2u);
  EXPECT_EQ((*cs)[1].label(), "A=2");
}

TEST(Tunables, ErrorsNameFileLineAndParameter) {
  expect_error("[parameters.A]\nvalues = [1, 2\n", "sol/tunables.toml", 2);                  // TOML syntax
  expect_error("[parameters.A]\nmacro = \"A\"\n", "parameter 'A': give exactly one of", 1);  // no values
  expect_error("[parameters.A]\nvalues = []\n", "parameter 'A': 'values' must be a non-empty", 2);
  expect_error("\n[parameters.A]\nvalues = [1]\nrange = {min = 1, max = 2}\n", "parameter 'A': give exactly one", 2);
  expect_error("[parameters.A]\nvalues = [1, 1]\n", "parameter 'A': value 1 is listed twice", 2);
  expect_error("[parameters.A]\nvalues = [1.5]\n", "parameter 'A': values must be integers", 2);
  expect_error("[parameters.A]\nvalues = [\"a\\nb\"]\n", "parameter 'A': string value", 2);
  expect_error("[parameters.A]\nrange = {min = 4, max = 1}\n", "parameter 'A': range max is below min", 2);
  expect_error("[parameters.A]\nrange = {min = 1, max = 4, step = 0}\n", "parameter 'A': range step must be positive",
               2);
  expect_error("[parameters.A]\nrange = {min = 1}\n", "parameter 'A': range needs 'max'", 2);
  expect_error("[parameters.A]\nrange = {min = 1, max = 9999999}\n", "more than 4096 values", 2);
  expect_error("[parameters.A]\nvalues = [1]\nbind = \"template-ish\"\n", "parameter 'A': 'bind' must be", 3);
  expect_error("[parameters.A]\nvalues = [\"x y\"]\nbind = \"template\"\n", "not an identifier", 1);
  expect_error("[parameters.A]\nvalues = [1]\nmacro = \"1X\"\n", "parameter 'A': 'macro' must be an identifier", 3);
  expect_error("[parameters.A]\nvalues = [1]\ncolour = 2\n", "parameter 'A': unknown key 'colour'", 3);
  expect_error("[parameters.hidden_size]\nvalues = [1]\n", "parameter 'hidden_size': has the name of a definition axis",
               1);
  expect_error("[parameters.A]\nvalues = [1]\n[parameters.B]\nvalues = [2]\nmacro = \"A\"\n",
               "parameter 'B': macro 'A' is bound twice", 3);
  expect_error("[parameters.A]\nvalues = [1]\n[tuning]\nx = 1\n", "tuning: unknown section", 3);
  expect_error("constraints = [\"A <\"]\n[parameters.A]\nvalues = [1]\n", "constraint 'A <'", 1);
  expect_error("constraints = [\"B > 1\"]\n[parameters.A]\nvalues = [1]\n", "'B' is neither a parameter nor an axis",
               1);
  expect_error("constraints = [\"A > 1\"]\n[parameters.A]\nvalues = [\"x\"]\n", "parameter 'A' has non-integer values",
               1);
  expect_error("[parameters.A]\nvalues = [1]\n\n[[variant]]\nname = \"v\"\nentry_point = \"nope.cc::run\"\n",
               "variant 'v': entry_point file 'nope.cc' is not a source", 4);
  expect_error("[[variant]]\nname = \"v\"\nsources = [\"x.cc\"]\n",
               "variant 'v': source 'x.cc' is not in solution.json", 3);
  expect_error("[[variant]]\nname = \"v\"\nsources = [\"other.cc\"]\n", "its sources do not include its entry_point",
               1);
  expect_error("[[variant]]\nname = \"v\"\n[[variant]]\nname = \"v\"\n", "variant 'v': declared twice", 3);
  expect_error("[[variant]]\nname = \"v\"\nparameters = [\"Z\"]\n", "variant 'v': parameter 'Z' is not declared", 3);
  expect_error("[[regime]]\nname = \"r\"\nheads = [1, 2]\n", "regime 'r': 'heads' is not a var axis", 3);
  expect_error("[[regime]]\nname = \"r\"\nbatch_size = [4, 2]\n", "regime 'r': 'batch_size' range [lo, hi] has hi < lo",
               3);
  expect_error("[[regime]]\nname = \"r\"\n", "regime 'r': constrains no axis", 1);
  expect_error("[[regime]]\nbatch_size = 1\n", "regime: needs a non-empty 'name'", 1);
  // Constraints excluding everything is an error too.
  auto t = parse("constraints = [\"A > 5\"]\n[parameters.A]\nvalues = [1, 2]\n");
  ASSERT_TRUE(t.ok());
  auto cs = enumerate_configs(*t);
  ASSERT_FALSE(cs.ok());
  EXPECT_NE(cs.status().message().find("exclude every configuration"), std::string::npos);
}

}  // namespace
}  // namespace kda::tune
