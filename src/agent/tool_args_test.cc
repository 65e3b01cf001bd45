#include "agent/tool_args.h"

#include <gtest/gtest.h>

namespace kda::agent {
namespace {

using json = nlohmann::json;

const std::vector<ArgSpec>& specs() {
  static const std::vector<ArgSpec> s = {
      string_arg("query", "search words").required().non_empty(),
      string_arg("content", "may be empty").required(),
      integer_arg("limit", "results").in_range(1, 20),
      integer_arg("page", "1 = newest").at_least(1),
      boolean_arg("regex", "a regular expression"),
      enum_arg("kind", "chunk kind", {"page", "code"}),
      string_list_arg("extra", "more pages", 2),
  };
  return s;
}

std::string error_of(const json& args, UnknownArgs unknown = UnknownArgs::kRefuse) {
  ArgValues a(specs(), args, unknown);
  return a.error().value_or("");
}

// The schema says what the reader checks: names, types, ranges, enum, required, no other keys.
TEST(ToolArgs, SchemaComesFromTheDeclarations) {
  const json s = args_schema(specs());
  EXPECT_EQ(s["type"], "object");
  EXPECT_EQ(s["additionalProperties"], false);
  EXPECT_EQ(s["required"], json({"query", "content"}));
  EXPECT_EQ(s["properties"]["query"], json({{"type", "string"}, {"minLength", 1}, {"description", "search words"}}));
  EXPECT_EQ(s["properties"]["limit"]["minimum"], 1);
  EXPECT_EQ(s["properties"]["limit"]["maximum"], 20);
  EXPECT_FALSE(s["properties"]["page"].contains("maximum"));
  EXPECT_EQ(s["properties"]["regex"]["type"], "boolean");
  EXPECT_EQ(s["properties"]["kind"]["enum"], json({"page", "code"}));
  EXPECT_EQ(s["properties"]["extra"]["maxItems"], 2);
  EXPECT_EQ(s["properties"]["extra"]["items"]["type"], "string");
  EXPECT_EQ(args_schema({})["properties"], json::object());
}

TEST(ToolArgs, ReadsWellFormedArguments) {
  ArgValues a(specs(), {{"query", "tma"},
                        {"content", ""},
                        {"limit", 3.0},
                        {"regex", false},
                        {"kind", "code"},
                        {"extra", {"a", "b"}},
                        {"page", nullptr}});
  ASSERT_FALSE(a.error()) << *a.error();
  EXPECT_EQ(a.string("query"), "tma");
  EXPECT_EQ(a.string("content"), "");          // required, and empty is allowed
  EXPECT_EQ(a.integer("limit"), 3);            // an integral float is an integer
  EXPECT_EQ(a.integer("page"), std::nullopt);  // null is absent
  EXPECT_EQ(a.boolean("regex"), false);
  EXPECT_EQ(a.string("kind"), "code");
  EXPECT_EQ(a.strings("extra"), (std::vector<std::string>{"a", "b"}));
}

// Each problem is named as the model should read it; the first one found wins.
TEST(ToolArgs, RefusesEachKindOfBadArgument) {
  const json ok = {{"query", "q"}, {"content", "c"}};
  auto with = [&](const char* key, json v) {
    json j = ok;
    j[key] = std::move(v);
    return error_of(j);
  };
  EXPECT_EQ(error_of(json::array()), "arguments must be a JSON object");
  EXPECT_EQ(error_of(json::object()), "missing required argument \"query\" (a non-empty string)");
  EXPECT_EQ(error_of({{"query", ""}, {"content", "c"}}), "missing required argument \"query\" (a non-empty string)");
  EXPECT_EQ(error_of({{"query", "q"}}), "missing required argument \"content\"");
  EXPECT_EQ(with("query", 5), "argument \"query\" must be a string");
  EXPECT_EQ(with("limit", 0), "argument \"limit\" must be an integer from 1 to 20");
  EXPECT_EQ(with("limit", 2.5), "argument \"limit\" must be an integer from 1 to 20");
  EXPECT_EQ(with("limit", "3"), "argument \"limit\" must be an integer from 1 to 20");
  EXPECT_EQ(with("page", 0), "argument \"page\" must be an integer of at least 1");
  EXPECT_EQ(with("page", 1e300), "argument \"page\" must be an integer of at least 1");
  EXPECT_EQ(with("regex", "no"), "argument \"regex\" must be true or false");
  EXPECT_EQ(with("kind", "pr"), "argument \"kind\" must be one of page, code, not \"pr\"");
  EXPECT_EQ(with("extra", json({"a", "b", "c"})), "argument \"extra\" must be an array of at most 2 non-empty strings");
  EXPECT_EQ(with("extra", json({"a", ""})), "argument \"extra\" must be an array of at most 2 non-empty strings");
  EXPECT_EQ(with("extra", "a"), "argument \"extra\" must be an array of at most 2 non-empty strings");
  EXPECT_EQ(with("lmit", 3), "unknown argument \"lmit\" (accepted: query, content, limit, page, regex, kind, extra)");
  EXPECT_EQ(error_of({{"query", "q"}, {"content", "c"}, {"lmit", 3}}, UnknownArgs::kIgnore), "");
  // After an error no value is handed out.
  ArgValues bad(specs(), {{"query", "q"}, {"content", "c"}, {"limit", 0}});
  EXPECT_EQ(bad.string("query"), std::nullopt);
}

TEST(ToolArgs, NoArgumentsIsAnEmptyObject) {
  const std::vector<ArgSpec> none;
  EXPECT_FALSE(ArgValues(none, nullptr).error());
  EXPECT_FALSE(ArgValues(none, json::object()).error());
  EXPECT_EQ(ArgValues(none, {{"x", 1}}).error().value_or(""), "unknown argument \"x\" (accepted: none)");
}

TEST(ToolArgsDeathTest, ReadingAnUndeclaredArgumentIsAProgrammingError) {
  ArgValues a(specs(), {{"query", "q"}, {"content", "c"}});
  EXPECT_DEATH((void)a.string("nope"), "not declared");
  EXPECT_DEATH((void)a.integer("query"), "not declared");  // declared, but not as an integer
}

}  // namespace
}  // namespace kda::agent
