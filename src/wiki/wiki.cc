#include "wiki/wiki.h"

#include <unistd.h>

#include <cstdlib>

#include "util/fs.h"

namespace kda::wiki {

namespace stdfs = std::filesystem;

stdfs::path default_db_path() { return fs::user_data_dir(kWikiDirEnv) / "wiki.db"; }

std::optional<stdfs::path> find_knowledge_dir() {
  std::error_code ec;
  if (const char* env = std::getenv(kKnowledgeDirEnv); env && *env) {
    if (stdfs::is_directory(env, ec)) return stdfs::path(env);
    return std::nullopt;
  }
  stdfs::path exe = stdfs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    stdfs::path k = exe.parent_path().parent_path() / "knowledge";
    if (stdfs::is_directory(k, ec)) return k;
  }
  if (stdfs::is_directory("knowledge", ec)) return stdfs::absolute("knowledge", ec);
  return std::nullopt;
}

Result<AliasTable> load_aliases(const std::optional<stdfs::path>& knowledge_dir) {
  if (knowledge_dir) {
    stdfs::path f = *knowledge_dir / "aliases.txt";
    std::error_code ec;
    if (stdfs::exists(f, ec)) return AliasTable::load(f);
  }
  return AliasTable::builtin();
}

Result<std::unique_ptr<Index>> open_index(const stdfs::path& db_path, std::ostream* progress) {
  stdfs::path db = db_path.empty() ? default_db_path() : db_path;
  KDA_ASSIGN_OR_RETURN(auto index, Index::open(db));
  auto knowledge = find_knowledge_dir();
  KDA_ASSIGN_OR_RETURN(AliasTable aliases, load_aliases(knowledge));
  index->set_aliases(std::move(aliases));
  if (knowledge) {
    KDA_ASSIGN_OR_RETURN(int64_t n, index->file_count(kKnowledgeRepo));
    if (n == 0) {
      IngestOptions opt;
      opt.repo = kKnowledgeRepo;
      KDA_ASSIGN_OR_RETURN(IngestStats st, index->ingest({*knowledge}, opt, progress));
      (void)st;
    }
  }
  return index;
}

Result<std::vector<SearchHit>> search(const SearchRequest& request, const stdfs::path& db_path) {
  KDA_ASSIGN_OR_RETURN(auto index, open_index(db_path));
  return index->search(request);
}

Result<ChunkRecord> show(const std::string& id, const stdfs::path& db_path) {
  KDA_ASSIGN_OR_RETURN(auto index, open_index(db_path));
  return index->show(id);
}

}  // namespace kda::wiki
