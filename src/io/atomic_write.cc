#include "io/atomic_write.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "rlx/error.h"

namespace rlx::io {
namespace fs = std::filesystem;
namespace {

// Unique per process and call, so concurrent writers never share a temp name.
std::string temp_suffix() {
  static std::atomic<uint64_t> seq{0};
  return ".tmp" + std::to_string(::getpid()) + "." + std::to_string(seq++);
}

// Writes `pieces` to a new file at `path`; on failure removes it and throws
// an error naming `shown` (the destination the caller asked for).
void write_new_file(const fs::path& path, const std::vector<std::string_view>& pieces,
                    const std::string& shown) {
  FILE* f = std::fopen(path.c_str(), "wb");
  RLX_CHECK(f, shown, ": cannot open ", path.string(), " for writing: ", std::strerror(errno));
  bool ok = true;
  int err = 0;
  for (std::string_view p : pieces) {
    if (!ok || p.empty()) continue;
    ok = std::fwrite(p.data(), 1, p.size(), f) == p.size();
    if (!ok) err = errno;
  }
  if (std::fclose(f) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    std::remove(path.c_str());
    throw make_error(shown, ": write failed", err ? std::string(": ") + std::strerror(err) : "");
  }
}

}  // namespace

void write_file_atomic(const std::string& path, const std::vector<std::string_view>& pieces) {
  const std::string tmp = path + temp_suffix();
  write_new_file(tmp, pieces, path);
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw make_error(path, ": write failed: ", ec.message());
  }
}

void write_dir_atomic(const std::string& dir,
                      const std::vector<std::pair<std::string, std::string_view>>& files) {
  const std::string suffix = temp_suffix();
  const fs::path root(dir), tmp(dir + suffix), old(dir + ".old" + suffix);
  std::error_code ec;
  auto fail = [&](const std::string& why) {
    fs::remove_all(tmp, ec);
    return make_error(dir, ": write failed: ", why);
  };
  for (const auto& [rel, bytes] : files) {
    const fs::path p = tmp / rel;
    fs::create_directories(p.parent_path(), ec);
    if (ec) throw fail("cannot create " + p.parent_path().string() + ": " + ec.message());
    try {
      write_new_file(p, {bytes}, dir);
    } catch (const Error&) {
      fs::remove_all(tmp, ec);
      throw;
    }
  }
  // Swap in: the old directory moves aside first, so a failed rename can put
  // it back and the destination is never left half-replaced.
  const bool had_old = fs::exists(fs::symlink_status(root));
  if (had_old) {
    fs::rename(root, old, ec);
    if (ec) throw fail("cannot move the existing " + dir + " aside: " + ec.message());
  }
  fs::rename(tmp, root, ec);
  if (ec) {
    const std::string why = ec.message();
    if (had_old) fs::rename(old, root, ec);
    throw fail(why);
  }
  if (had_old) fs::remove_all(old, ec);
}

}  // namespace rlx::io
