// A small RAII layer over the SQLite C API: a connection, prepared statements with typed binds and
// column reads, and errors as Status values.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include <sqlite3.h>

#include "util/status.h"

namespace kda::sqlite {

class Statement {
 public:
  Statement() = default;
  Statement(sqlite3* db, sqlite3_stmt* s) : db_(db), s_(s) {}
  Statement(Statement&& o) noexcept : db_(o.db_), s_(o.s_) { o.s_ = nullptr; }
  Statement& operator=(Statement&& o) noexcept;
  ~Statement();

  Statement& bind(int i, std::string_view v);
  Statement& bind(int i, int64_t v);
  Statement& bind_int(int i, int v) { return bind(i, static_cast<int64_t>(v)); }
  Statement& bind(int i, double v);
  // Next row: true when a row is ready, false when done; errors as Status.
  Result<bool> step();
  Status run();  // steps to completion
  void reset();

  int64_t int_at(int col) const { return sqlite3_column_int64(s_, col); }
  double double_at(int col) const { return sqlite3_column_double(s_, col); }
  std::string text_at(int col) const;
  std::string_view view_at(int col) const;

 private:
  sqlite3* db_ = nullptr;
  sqlite3_stmt* s_ = nullptr;
};

class Database {
 public:
  static Result<std::unique_ptr<Database>> open(const std::filesystem::path& file);
  ~Database();
  sqlite3* handle() { return db_; }
  Status exec(const std::string& sql);
  int changes() const { return sqlite3_changes(db_); }  // rows the last INSERT, UPDATE or DELETE touched
  Result<Statement> prepare(const std::string& sql);
  std::string error() const { return sqlite3_errmsg(db_); }

 private:
  explicit Database(sqlite3* db) : db_(db) {}
  sqlite3* db_;
};

}  // namespace kda::sqlite
