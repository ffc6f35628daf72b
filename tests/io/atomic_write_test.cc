// Outputs are atomic: when a write fails midway (here: a file-size limit, as
// a full disk would), the destination keeps its old content or does not
// exist, and no temporary file is left beside it.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "io/atomic_write.h"
#include "rlx/gguf.h"
#include "rlx/model.h"
#include "support/testing.h"

namespace rlx {
namespace {
namespace fs = std::filesystem;
using testing::error_of;
using testing::list_dir;
using testing::slurp;

class AtomicWrite : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        testing::process_temp_dir(std::string("rlx_atomic_") +
                                  ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { fs::remove_all(dir_); }
  // Runs `write` under a 16 KiB file-size limit, first with nothing at
  // `name`, then over an old file; both must fail and leave the directory as
  // it was.
  template <typename F>
  void expect_atomic(const std::string& name, F write) {
    const std::string path = (dir_ / name).string();
    std::string msg;
    {
      testing::FileSizeLimit limit(16 << 10);
      msg = error_of([&] { write(path); });
    }
    EXPECT_NE(msg.find("write failed"), std::string::npos) << name << ": " << msg;
    EXPECT_NE(msg.find(path), std::string::npos) << name << ": " << msg;
    EXPECT_TRUE(list_dir(dir_).empty()) << name << ": left " << list_dir(dir_).size() << " files";
    std::ofstream(path) << "old";
    {
      testing::FileSizeLimit limit(16 << 10);
      EXPECT_THROW(write(path), Error) << name;
    }
    EXPECT_EQ(slurp(path), "old") << name;
    EXPECT_EQ(list_dir(dir_), std::vector<std::string>{name});
    fs::remove(path);
    write(path);  // without the limit it works
    EXPECT_GT(fs::file_size(path), size_t(16 << 10)) << name;
    fs::remove(path);
  }
  fs::path dir_;
};

// 64 KiB of f32: past the limit in every format.
Tensor big() { return testing::random_tensor({128, 128}, DType::F32, 1); }

TEST_F(AtomicWrite, Safetensors) {
  expect_atomic("t.safetensors", [](const std::string& p) {
    write_safetensors(p, {{"w", big()}});
  });
}

TEST_F(AtomicWrite, Npy) {
  expect_atomic("t.npy", [](const std::string& p) { write_npy(p, big()); });
}

TEST_F(AtomicWrite, Gguf) {
  Tensor t = big();
  const std::string_view bytes(static_cast<const char*>(t.raw()), t.nbytes());
  expect_atomic("t.gguf", [&](const std::string& p) {
    gguf::write(p, {}, {{"w", quant::GgmlType::F32, {128, 128}, bytes}});
  });
}

TEST_F(AtomicWrite, ModelDirectoryKeepsNoHalfWrittenGraph) {
  Graph g;
  Builder b(g);
  g.add_output("y", b.add(b.input("x", Shape(Dims{128, 128}, DType::F32)),
                          b.param("w", Shape(Dims{128, 128}, DType::F32))));
  const fs::path m = dir_ / "m";
  {
    testing::FileSizeLimit limit(16 << 10);
    EXPECT_THROW(save_model(m.string(), g, {{"w", big()}}), Error);
  }
  EXPECT_TRUE(list_dir(m).empty()) << list_dir(m).size() << " files left";
  save_model(m.string(), g, {{"w", big()}});
  EXPECT_EQ(list_dir(m), (std::vector<std::string>{"model.rlx.json", "weights.safetensors"}));
}

TEST_F(AtomicWrite, DirectoryTreeFailingMidwayLeavesNothing) {
  const std::string out = (dir_ / "pkg").string();
  // The second file's name is too long for the file system: a failure after
  // the first file is written.
  std::string msg = error_of([&] {
    io::write_dir_atomic(out, {{"a/one.txt", "1"}, {"a/" + std::string(300, 'n'), "2"}});
  });
  EXPECT_NE(msg.find(out), std::string::npos) << msg;
  EXPECT_TRUE(list_dir(dir_).empty()) << list_dir(dir_).size() << " entries left";
  // Over an existing tree: the old one survives a failure, a success replaces it whole.
  io::write_dir_atomic(out, {{"old.txt", "old"}});
  EXPECT_THROW(io::write_dir_atomic(out, {{"new.txt", "new"}, {std::string(300, 'n'), "2"}}),
               Error);
  EXPECT_EQ(list_dir(out), std::vector<std::string>{"old.txt"});
  EXPECT_EQ(list_dir(dir_), std::vector<std::string>{"pkg"});
  io::write_dir_atomic(out, {{"new.txt", "new"}});
  EXPECT_EQ(list_dir(out), std::vector<std::string>{"new.txt"});
  EXPECT_EQ(list_dir(dir_), std::vector<std::string>{"pkg"});
}

}  // namespace
}  // namespace rlx
