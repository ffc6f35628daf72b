// release_file_pages: a read-only file mapping's pages leave the resident set
// and read back unchanged; heap memory and ranges outside one mapping are
// never advised. Then the two callers: a packed weight and a folded weight.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <string>

#include "core/file_pages.h"
#include "rlx/builder.h"
#include "rlx/io.h"
#include "rlx/runtime.h"
#include "support/testing.h"

namespace rlx {
namespace {

using namespace testing;

// Mapped file pages this process has resident, bytes: RssFile, plus RssShmem
// for a temp dir on tmpfs (its files' pages are counted there).
size_t rss_file() {
  std::ifstream status("/proc/self/status");
  size_t kb = 0;
  for (std::string line; std::getline(status, line);)
    if (line.rfind("RssFile:", 0) == 0 || line.rfind("RssShmem:", 0) == 0)
      kb += size_t(std::stoull(line.substr(line.find(':') + 1)));
  return kb * 1024;
}

std::string pattern_file(size_t bytes) {
  const auto path = process_temp_dir("file_pages") / "pattern.bin";
  std::string data(bytes, '\0');
  for (size_t i = 0; i < bytes; ++i) data[i] = char(i * 131 + i / 4096);
  std::ofstream(path, std::ios::binary).write(data.data(), std::streamsize(bytes));
  return path.string();
}

TEST(FilePages, ReleasedPagesLeaveTheResidentSetAndReadBackUnchanged) {
  constexpr size_t kBytes = size_t(16) << 20;
  const std::string path = pattern_file(kBytes);
  auto buf = map_file(path);
  const auto* bytes = reinterpret_cast<const unsigned char*>(buf->data());
  unsigned sum = 0;
  for (size_t i = 0; i < kBytes; i += 1024) sum += bytes[i];
  const size_t before = rss_file();
  // Not page aligned at either end: the partial pages stay.
  const size_t advised = release_file_pages(bytes + 100, kBytes - 200);
  EXPECT_EQ(advised, kBytes - 2 * 4096);
  const size_t after = rss_file();
  EXPECT_GE(before - std::min(before, after), kBytes / 2) << before << " -> " << after;
  for (size_t i = 0; i < kBytes; ++i)
    ASSERT_EQ(bytes[i], static_cast<unsigned char>(i * 131 + i / 4096)) << i;
  EXPECT_NE(sum, 1u);  // the first pass read every page
}

TEST(FilePages, OnlyWhollyInsideARegisteredMapping) {
  std::vector<float> heap(size_t(1) << 20, 2.5f);
  EXPECT_EQ(release_file_pages(heap.data(), heap.size() * sizeof(float)), 0u);
  EXPECT_EQ(heap[12345], 2.5f);
  const std::string path = pattern_file(size_t(1) << 20);
  auto buf = map_file(path);
  EXPECT_EQ(release_file_pages(buf->data(), buf->size() + 4096), 0u);  // runs past the end
  EXPECT_EQ(release_file_pages(buf->data() + 10, 20), 0u);             // no whole page
  EXPECT_EQ(release_file_pages(buf->data(), buf->size()), buf->size());
  const void* gone = buf->data();
  buf.reset();  // unmapped: no longer registered
  EXPECT_EQ(release_file_pages(gone, 4096), 0u);
}

// A weight read from a safetensors file through a packed matmul and a
// compile-time fold (x @ (v + 1): v + 1 becomes a new constant) gives the same
// results run after run, once both have handed the file's pages back.
TEST(FilePages, PackedAndFoldedWeightsComputeTheSameAfterTheirPagesGoBack) {
  constexpr int64_t K = 1024, N = 1024;
  Tensor w = random_tensor({K, N}, DType::F32, 7);
  const auto path = process_temp_dir("file_pages_model") / "w.safetensors";
  write_safetensors(path.string(), {{"w", w}, {"v", w}});
  Graph g;
  Builder b(g);
  auto x = b.input("x", Shape(Dims{4, K}, DType::F32));
  auto v1 = b.add(b.param("v", Shape(Dims{K, N}, DType::F32)), b.full({K, N}, 1.0));
  g.add_output("y", b.matmul(x, b.param("w", Shape(Dims{K, N}, DType::F32))));
  g.add_output("z", b.matmul(x, v1));
  const Tensor xin = random_tensor({4, K}, DType::F32, 8);
  // From heap weights first: the code of every kernel is paged in by then.
  const TensorMap expect =
      Session(Executable::compile(g, {{"w", w}, {"v", w}}, {})).run({{"x", xin}});

  TensorMap mapped = read_safetensors(path.string());
  float touch = 0;
  for (const auto& [name, t] : mapped)
    for (int64_t i = 0; i < t.numel(); i += 1024) touch += t.data<float>()[i];
  const size_t before = rss_file();
  Session s(Executable::compile(g, mapped, {}));
  const TensorMap first = s.run({{"x", xin}});
  const size_t after = rss_file();
  // 8 MiB of weights went back, less a partial page or two.
  EXPECT_GE(before - std::min(before, after), size_t(6) << 20) << before << " -> " << after;
  EXPECT_TRUE(all_equal(first.at("y"), expect.at("y")));
  EXPECT_TRUE(all_equal(first.at("z"), expect.at("z")));
  for (int i = 0; i < 2; ++i) {
    const TensorMap again = s.run({{"x", xin}});
    EXPECT_TRUE(all_equal(again.at("y"), expect.at("y")));
    EXPECT_TRUE(all_equal(again.at("z"), expect.at("z")));
  }
  EXPECT_TRUE(std::isfinite(touch));
}

}  // namespace
}  // namespace rlx
