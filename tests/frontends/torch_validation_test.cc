// torch-ir.json values the importer used to accept silently or crash on
// (issue 10): deep nesting, view sizes that lie, duplicate ids, fractional
// dims, list-shaped kwargs, index_select with 0-d operands. Each must load
// correctly or fail with an rlx::Error naming the file and the node.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "frontends/torch/torch_ir.h"
#include "rlx/model.h"
#include "rlx/runtime.h"
#include "support/testing.h"

namespace rlx {
namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::has;

json int_list(const std::vector<json>& v) {
  json l = json::array();
  for (const json& i : v) l.push_back({{"int", i}});
  return {{"list", l}};
}

// x[2,3] -> aten.view.default(x, size) recorded as `out`.
json view_doc(const json& size, const json& out = {2, 3}) {
  json d = {{"format", "rlx-torch-ir"}, {"version", 1}};
  d["inputs"] = {{{"id", "x"}, {"shape", {2, 3}}, {"dtype", "f32"}}};
  d["nodes"] = {{{"id", "v"},
                 {"op", "aten.view.default"},
                 {"args", {{{"ref", "x"}}, size}},
                 {"out", {{"shape", out}, {"dtype", "f32"}}}}};
  d["outputs"] = {{{"ref", "v"}}};
  return d;
}

class TorchValidation : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        testing::process_temp_dir(std::string("rlx_torch_valid_") +
                                  ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override { fs::remove_all(dir_); }
  void write(const std::string& text) { std::ofstream(dir_ / "torch-ir.json") << text; }
  std::string load_error(const json& d) {
    write(d.dump());
    return testing::error_of([&] { load_model(dir_.string()); });
  }
  fs::path dir_;
};

TEST_F(TorchValidation, NestingBeyondTheLimitIsAnErrorNotACrash) {
  // A list argument nested 10^6 deep used to overflow the stack (SIGSEGV).
  const size_t n = 1000000;
  std::string arg;
  for (size_t k = 0; k < n; ++k) arg += "{\"list\":[";
  arg += "{\"int\":1}";
  for (size_t k = 0; k < n; ++k) arg += "]}";
  json d = view_doc(int_list({2, 3}));
  std::string text = d.dump();
  const std::string at = "{\"int\":2}";
  text.replace(text.find(at), at.size(), arg);
  write(text);
  std::string msg = testing::error_of([&] { load_model(dir_.string()); });
  EXPECT_TRUE(has(msg, "torch-ir.json: JSON nests deeper than 512 levels")) << msg.substr(0, 300);
}

TEST_F(TorchValidation, ViewSizesMustBeValidAndAgreeWithTheRecordedOutput) {
  struct Case {
    json size;
    const char* expect;
  };
  const uint64_t wraps = (uint64_t(1) << 63) + 3;  // 2 * (2^63 + 3) == 6 mod 2^64
  std::vector<json> rank_1e6(1000000, 1);
  const std::vector<Case> cases = {
      {int_list({-2, -3}), "negative dim -2"},
      {int_list({2, wraps}), "does not fit in int64"},
      {int_list({2, (int64_t(1) << 62) + 3}), "more than 2^60 elements"},
      {int_list(rank_1e6), "rank 1000000"},
      {int_list({-1, -1}), "more than one -1"},
      {int_list({3, 2}), "target shape [3,2] gives [3,2] but PyTorch recorded [2,3]"},
      {int_list({2, 2}), "cannot reshape 6 elements to [2,2]"},
      {json{{"str", "2,3"}}, "must be a list of sizes"},
  };
  for (const Case& c : cases) {
    std::string msg = load_error(view_doc(c.size));
    EXPECT_TRUE(has(msg, c.expect)) << msg.substr(0, 400);
    if (!has(msg, "does not fit")) {  // that one is a parse error, before lowering
      EXPECT_TRUE(has(msg, "while lowering node 'v' (aten.view.default)")) << msg.substr(0, 400);
    }
    EXPECT_LT(msg.size(), 1000u) << "huge shapes are abbreviated";
  }
  EXPECT_EQ(load_error(view_doc(int_list({-1, 3}))), "");
  EXPECT_EQ(load_error(view_doc(int_list({6}), json::array({6}))), "");
}

TEST_F(TorchValidation, IdsAreUnique) {
  json d = view_doc(int_list({2, 3}));
  d["nodes"].push_back(d["nodes"][0]);
  std::string msg = load_error(d);
  EXPECT_TRUE(has(msg, "torch-ir.json: node v: id 'v' is defined twice")) << msg;
  d = view_doc(int_list({2, 3}));
  d["nodes"][0]["id"] = "x";  // shadows the input
  msg = load_error(d);
  EXPECT_TRUE(has(msg, "id 'x' is defined twice")) << msg;
}

TEST_F(TorchValidation, DimsAndIntsMustBeIntegers) {
  json d = view_doc(int_list({2, 3}));
  d["inputs"][0]["shape"] = json::parse("[2, 2.5]");
  std::string msg = load_error(d);
  EXPECT_TRUE(has(msg, "input x: shape must be an integer, got 2.5")) << msg;
  d = view_doc(int_list({2, 3}));
  d["nodes"][0]["out"]["shape"] = json::parse("[2.0, 3]");
  EXPECT_TRUE(has(load_error(d), "must be an integer")) << load_error(d);
  d = view_doc(int_list({json::parse("2.5"), 3}));
  msg = load_error(d);
  EXPECT_TRUE(has(msg, "node v: an int Arg must be an integer, got 2.5")) << msg;
  d = view_doc(int_list({2, 3}));
  d["inputs"][0]["dynamic"] = json::parse("[0.5, -1]");
  EXPECT_TRUE(has(load_error(d), "\"dynamic\" must be an integer")) << load_error(d);
  d = view_doc(int_list({2, 3}));
  d["inputs"][0]["dynamic"] = json::parse("[\"1x\", -1]");
  EXPECT_TRUE(has(load_error(d), "symbol name '1x' is not an identifier")) << load_error(d);
  d = view_doc(int_list({2, 3}));
  d["inputs"][0]["dynamic"] = json::parse("[-2, -1]");
  EXPECT_TRUE(has(load_error(d), "\"dynamic\" entry -2")) << load_error(d);
  d = view_doc(int_list({2, 3}));
  d["inputs"][0]["shape"] = json::parse("[2, 9223372036854775811]");
  EXPECT_TRUE(has(load_error(d), "does not fit in int64")) << load_error(d);
}

TEST_F(TorchValidation, ContainersMustHaveTheirKinds) {
  json d = view_doc(int_list({2, 3}));
  d["nodes"][0]["kwargs"] = json::array({json{{"int", 1}}});
  std::string msg = load_error(d);
  EXPECT_TRUE(has(msg, "node v: \"kwargs\" must be an object, got array")) << msg;
  d = view_doc(int_list({2, 3}));
  d["nodes"][0]["args"] = json{{"a", json{{"ref", "x"}}}};
  EXPECT_TRUE(has(load_error(d), "\"args\" must be an array")) << load_error(d);
  d = view_doc(int_list({2, 3}));
  d["nodes"] = json{{"v", d["nodes"][0]}};
  EXPECT_TRUE(has(load_error(d), "\"nodes\" must be an array")) << load_error(d);
  d = view_doc(json{{"list", json{{"a", 1}}}});
  EXPECT_TRUE(has(load_error(d), "a list Arg must be an array")) << load_error(d);
}

// index_select with a 0-d index keeps the dim (size 1); with a 0-d self the
// result is 0-d. A 0-d self used to end in "vector::_M_range_insert".
TEST_F(TorchValidation, IndexSelectWithZeroDimOperands) {
  json d = {{"format", "rlx-torch-ir"}, {"version", 1}};
  d["inputs"] = {{{"id", "x"}, {"shape", {3, 4}}, {"dtype", "f32"}},
                 {{"id", "s"}, {"shape", json::array()}, {"dtype", "f32"}},
                 {{"id", "i"}, {"shape", json::array()}, {"dtype", "i64"}},
                 {{"id", "j"}, {"shape", json::array()}, {"dtype", "i64"}}};
  d["nodes"] = {{{"id", "row"},
                 {"op", "aten.index_select.default"},
                 {"args", {{{"ref", "x"}}, {{"int", 0}}, {{"ref", "i"}}}},
                 {"out", {{"shape", {1, 4}}, {"dtype", "f32"}}}},
                {{"id", "one"},
                 {"op", "aten.index_select.default"},
                 {"args", {{{"ref", "s"}}, {{"int", 0}}, {{"ref", "j"}}}},
                 {"out", {{"shape", json::array()}, {"dtype", "f32"}}}}};
  d["outputs"] = {{{"ref", "row"}}, {{"ref", "one"}}};
  ASSERT_EQ(load_error(d), "");
  Model m = load_model(dir_.string());
  Tensor x = testing::random_tensor({3, 4}, DType::F32, 1);
  Tensor s = Tensor::from_vector<float>({}, {7.5f}, DType::F32);
  Tensor i = Tensor::from_vector<int64_t>({}, {2}, DType::I64);
  Tensor j = Tensor::from_vector<int64_t>({}, {0}, DType::I64);
  TensorMap out = Session(Executable::compile(m.graph, m.weights))
                      .run({{"x", x}, {"s", s}, {"i", i}, {"j", j}});
  ASSERT_EQ(out.at("out::0").dims(), (Dims{1, 4}));
  for (int k = 0; k < 4; ++k) EXPECT_EQ(out.at("out::0").data<float>()[k], x.data<float>()[8 + k]);
  ASSERT_EQ(out.at("out::1").dims(), Dims{});
  EXPECT_EQ(*out.at("out::1").data<float>(), 7.5f);
  // A 2-d index is not index_select's: an error naming the node.
  d["inputs"][2]["shape"] = {1, 1};
  std::string msg = load_error(d);
  EXPECT_TRUE(has(msg, "while lowering node 'row' (aten.index_select.default)")) << msg;
  EXPECT_TRUE(has(msg, "index must be 0-d or 1-d")) << msg;
  EXPECT_FALSE(has(msg, "vector::")) << msg;
}

}  // namespace
}  // namespace rlx
