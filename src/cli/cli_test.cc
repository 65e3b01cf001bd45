#include <gtest/gtest.h>

#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "util/fs.h"

namespace kda::cli {
namespace {

CommandSpec sample() {
  return {.name = "demo run",
          .summary = "demo",
          .positionals = {{.name = "task", .help = "t"},
                          {.name = "more", .help = "m", .required = false, .variadic = true}},
          .options = {json_option(),
                      {.name = "seed", .metavar = "N", .help = "seed", .env = "KDA_TEST_SEED"},
                      {.name = "limit", .short_name = 'n', .metavar = "N", .help = "l", .default_value = "5"},
                      {.name = "tag", .metavar = "T", .help = "t", .repeatable = true}},
          .run = [](const Args&, Io&) { return 0; }};
}

Result<Args> parse(std::vector<std::string> v) { return parse_args(sample(), v); }

TEST(Args, ParsesOptionsAndPositionals) {
  static const CommandSpec spec = sample();
  std::vector<std::string> v{"t1", "--json", "--seed=7", "-n", "9", "--tag", "a", "x", "--tag", "b", "y"};
  auto a = parse_args(spec, v);
  ASSERT_TRUE(a.ok()) << a.status().message();
  EXPECT_TRUE(a->flag("json"));
  EXPECT_EQ(a->value("seed"), "7");
  EXPECT_EQ(**a->integer("limit"), 9);
  EXPECT_EQ(a->values("tag"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(a->positional("task"), "t1");
  EXPECT_EQ(a->positionals("more"), (std::vector<std::string>{"x", "y"}));
  EXPECT_TRUE(a->given("limit"));
  EXPECT_TRUE(a->given("seed"));
}

TEST(Args, DefaultsAndEnvironment) {
  static const CommandSpec spec = sample();
  std::vector<std::string> v{"t1"};
  ::setenv("KDA_TEST_SEED", "42", 1);
  auto a = parse_args(spec, v);
  ::unsetenv("KDA_TEST_SEED");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->value("seed"), "42");
  EXPECT_EQ(a->value("limit"), "5");
  EXPECT_FALSE(a->flag("json"));
  EXPECT_TRUE(a->given("seed"));    // from the environment: the user set it
  EXPECT_FALSE(a->given("limit"));  // only the default applies
  EXPECT_FALSE(a->given("json"));
}

TEST(Args, RejectsBadUsage) {
  EXPECT_FALSE(parse({}).ok());                                   // missing <task>
  EXPECT_FALSE(parse({"t", "--nope"}).ok());                      // unknown option
  EXPECT_FALSE(parse({"t", "--seed"}).ok());                      // missing value
  EXPECT_FALSE(parse({"t", "--json=1"}).ok());                    // flag with value
  EXPECT_FALSE(parse({"t", "--seed", "1", "--seed", "2"}).ok());  // not repeatable
  static const CommandSpec spec = sample();
  std::vector<std::string> v{"t", "--limit", "x"};
  auto a = parse_args(spec, v);
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(a->integer("limit").ok());
}

TEST(Help, ListsEveryOption) {
  std::string h = help_text(sample());
  for (const char* s :
       {"usage: kda demo run", "<task>", "--json", "--seed N", "KDA_TEST_SEED", "default: 5", "-h, --help"})
    EXPECT_NE(h.find(s), std::string::npos) << s;
}

int run(std::vector<std::string> v, std::string* out = nullptr, std::string* err = nullptr) {
  std::ostringstream o, e;
  Io io{o, e};
  int rc = dispatch(v, io);
  if (out) *out = o.str();
  if (err) *err = e.str();
  return rc;
}

TEST(Dispatch, ExitCodes) {
  std::string out, err;
  EXPECT_EQ(run({"--help"}, &out), kExitOk);
  EXPECT_NE(out.find("docs"), std::string::npos);
  EXPECT_EQ(run({}, nullptr, &err), kExitBadInput);
  EXPECT_EQ(run({"no-such-command"}, nullptr, &err), kExitBadInput);
  EXPECT_NE(err.find("unknown command"), std::string::npos);
  EXPECT_EQ(run({"docs", "--bogus"}, nullptr, &err), kExitBadInput);
  EXPECT_EQ(run({"--version"}, &out), kExitOk);
}

// --json on a failure that wrote no result: one JSON object on stdout with the exit code and what
// stderr said (was: nothing on stdout, issue 21), for a bad option and for a command's own error.
TEST(Dispatch, JsonOnAFailureIsAJsonError) {
  std::string out, err;
  EXPECT_EQ(run({"eval", "/nonexistent/solution", "--task", "/nonexistent/pack", "--json"}, &out, &err), kExitBadInput);
  auto j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << out;
  EXPECT_EQ(j["ok"], false);
  EXPECT_EQ(j["exit_code"], kExitBadInput);
  EXPECT_EQ(j["kind"], "bad_input");
  EXPECT_NE(j["error"].get<std::string>().find("/nonexistent"), std::string::npos) << j.dump();
  EXPECT_FALSE(err.empty());  // stderr still says it

  EXPECT_EQ(run({"eval", "x", "--json", "--no-such-option"}, &out, &err), kExitBadInput);
  j = nlohmann::json::parse(out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << out;
  EXPECT_NE(j["error"].get<std::string>().find("no-such-option"), std::string::npos) << j.dump();

  // Without --json nothing changes: stdout stays empty.
  EXPECT_EQ(run({"eval", "/nonexistent/solution", "--task", "/nonexistent/pack"}, &out, &err), kExitBadInput);
  EXPECT_TRUE(out.empty()) << out;
}

TEST(Dispatch, EveryCommandHasHelp) {
  for (const auto& c : all_commands()) {
    std::string out;
    std::vector<std::string> v;
    std::string word;
    for (char ch : c.name + " ") {
      if (ch == ' ') {
        v.push_back(word);
        word.clear();
      } else
        word += ch;
    }
    v.push_back("--help");
    EXPECT_EQ(run(v, &out), kExitOk) << c.name;
    EXPECT_NE(out.find("usage: kda " + c.name), std::string::npos) << c.name;
    EXPECT_FALSE(c.summary.empty()) << c.name;
  }
}

// docs/cli.md is generated; regenerate with `build/kda docs -o docs/cli.md`.
TEST(Docs, CliReferenceIsCurrent) {
  auto committed = fs::read_file(std::string(KDA_SOURCE_DIR) + "/docs/cli.md");
  ASSERT_TRUE(committed.ok()) << "docs/cli.md missing: run build/kda docs -o docs/cli.md";
  EXPECT_EQ(*committed, commands_markdown()) << "docs/cli.md is stale: run build/kda docs -o docs/cli.md";
}

}  // namespace
}  // namespace kda::cli
