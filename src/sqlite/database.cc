#include "sqlite/database.h"

namespace kda::sqlite {

Statement& Statement::operator=(Statement&& o) noexcept {
  if (this != &o) {
    if (s_) sqlite3_finalize(s_);
    db_ = o.db_;
    s_ = o.s_;
    o.s_ = nullptr;
  }
  return *this;
}

Statement::~Statement() {
  if (s_) sqlite3_finalize(s_);
}

Statement& Statement::bind(int i, std::string_view v) {
  sqlite3_bind_text(s_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  return *this;
}
Statement& Statement::bind(int i, int64_t v) {
  sqlite3_bind_int64(s_, i, v);
  return *this;
}
Statement& Statement::bind(int i, double v) {
  sqlite3_bind_double(s_, i, v);
  return *this;
}

Result<bool> Statement::step() {
  int rc = sqlite3_step(s_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  std::string msg = sqlite3_errmsg(db_);
  // A malformed MATCH expression is the user's input, not an internal failure.
  if (msg.find("fts5") != std::string::npos || msg.find("syntax error") != std::string::npos)
    return Status::bad_input("search: " + msg);
  return Status::io("sqlite: " + msg);
}

Status Statement::run() {
  while (true) {
    KDA_ASSIGN_OR_RETURN(bool row, step());
    if (!row) break;
  }
  reset();
  return {};
}

void Statement::reset() {
  sqlite3_reset(s_);
  sqlite3_clear_bindings(s_);
}

std::string Statement::text_at(int col) const { return std::string(view_at(col)); }

std::string_view Statement::view_at(int col) const {
  const unsigned char* p = sqlite3_column_text(s_, col);
  if (!p) return {};
  return {reinterpret_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(s_, col))};
}

Result<std::unique_ptr<Database>> Database::open(const std::filesystem::path& file) {
  sqlite3* db = nullptr;
  int rc =
      sqlite3_open_v2(file.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    if (db) sqlite3_close(db);
    return Status::io("opening " + file.string() + ": " + msg);
  }
  sqlite3_busy_timeout(db, 10000);
  return std::unique_ptr<Database>(new Database(db));
}

Database::~Database() { sqlite3_close(db_); }

Status Database::exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    return Status::io("sqlite: " + msg);
  }
  return {};
}

Result<Statement> Database::prepare(const std::string& sql) {
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) != SQLITE_OK)
    return Status::io("sqlite: preparing statement: " + error());
  return Statement(db_, s);
}

}  // namespace kda::sqlite
