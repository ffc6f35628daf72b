// The attribute schema of ops.def, swept over every op: the one parser
// round-trips each op's attributes, rejects misspelt keys, wrong kinds and
// bad enum values, and the per-family enums line up with the op table.
#include <gtest/gtest.h>

#include <map>

#include "rlx/error.h"
#include "rlx/graph.h"
#include "support/testing.h"

namespace rlx {
namespace {

std::vector<Op> all_ops() {
  std::vector<Op> ops;
  for (int i = 0; i < num_ops(); ++i) ops.push_back(Op(i));
  return ops;
}

// A value of a kind no field of `v`'s kind accepts.
AttrValue wrong_kind(const AttrValue& v) {
  if (std::holds_alternative<std::vector<int64_t>>(v) ||
      std::holds_alternative<std::vector<double>>(v))
    return std::string("not a list");
  return std::vector<int64_t>{1, 2};
}

TEST(OpSchema, EveryOpParsesItsDefaultsBackFromTheMap) {
  for (Op op : all_ops()) {
    const OpAttrs d = default_attrs(op);
    EXPECT_TRUE(attrs_match(op, d)) << op_name(op);
    // Every field, required ones included, written out and parsed back.
    const Attrs full = attrs_to_map(d);
    EXPECT_TRUE(parse_attrs(op, full) == d) << op_name(op) << " {" << full.str() << "}";
    // Only the fields that differ from the defaults: nothing for a default struct,
    // except required fields (which have no default to fall back on).
    const Attrs sparse = attrs_to_map(d, true);
    EXPECT_TRUE(parse_attrs(op, sparse) == d) << op_name(op) << " {" << sparse.str() << "}";
  }
}

TEST(OpSchema, EveryOpRejectsAMisspeltKeyNamingItAndTheSchema) {
  for (Op op : all_ops()) {
    Attrs a = attrs_to_map(default_attrs(op));
    a.set("axiss", int64_t(1));
    const std::string msg = testing::error_of([&] { parse_attrs(op, a); });
    EXPECT_NE(msg.find(std::string(op_name(op)) + ": unknown attribute 'axiss'"), std::string::npos)
        << msg;
    EXPECT_NE(msg.find(attrs_schema(op)), std::string::npos) << msg;
  }
}

TEST(OpSchema, EveryFieldRejectsAWrongKind) {
  int checked = 0;
  for (Op op : all_ops()) {
    const Attrs good = attrs_to_map(default_attrs(op));
    for (const auto& [key, value] : good.items()) {
      Attrs bad = good;
      bad.set(key, wrong_kind(value));
      const std::string msg = testing::error_of([&] { parse_attrs(op, bad); });
      EXPECT_NE(msg.find("attribute '" + key + "'"), std::string::npos)
          << op_name(op) << "." << key << ": " << msg;
      ++checked;
    }
  }
  EXPECT_GT(checked, 100);
}

TEST(OpSchema, RequiredFieldsMustBePresent) {
  EXPECT_NE(testing::error_of([] {
              parse_attrs(Op::Transpose, {});
            }).find("transpose: missing attribute 'perm'"),
            std::string::npos);
  EXPECT_NE(testing::error_of([] { parse_attrs(Op::Cast, {}); }).find("dtype: dtype (required)"),
            std::string::npos);
  // Optional ones are absent until set.
  const auto a = std::get<RopeAttrs>(parse_attrs(Op::Rope, {{"rotary_dims", 64}}));
  EXPECT_EQ(a.rotary_dims, 64);
  EXPECT_EQ(a.theta, 10000.0);
  EXPECT_FALSE(std::get<RopeAttrs>(parse_attrs(Op::Rope, {})).rotary_dims.has_value());
}

TEST(OpSchema, EnumsBoolsDtypesAndOpsParseFromTheirSpelling) {
  auto at = std::get<AttentionAttrs>(
      parse_attrs(Op::Attention, {{"mask", std::string("sliding")}, {"window", 4}}));
  EXPECT_EQ(at.mask, MaskKind::sliding);
  EXPECT_EQ(to_string(at.mask), "sliding");
  EXPECT_NE(testing::error_of([] {
              parse_attrs(Op::Attention, {{"mask", std::string("triangular")}});
            }).find("unknown MaskKind 'triangular' (valid: none, causal, sliding, bias)"),
            std::string::npos);
  // Flags accept true/false and, as version-1 graphs wrote them, 0/1; nothing else.
  EXPECT_TRUE(std::get<ReduceAttrs>(parse_attrs(Op::ReduceSum, {{"keepdims", true}})).keepdims);
  EXPECT_TRUE(std::get<ReduceAttrs>(parse_attrs(Op::ReduceSum, {{"keepdims", 1}})).keepdims);
  EXPECT_THROW(parse_attrs(Op::ReduceSum, {{"keepdims", 2}}), Error);
  EXPECT_EQ(std::get<CastAttrs>(parse_attrs(Op::Cast, {{"dtype", std::string("bf16")}})).dtype,
            DType::BF16);
  EXPECT_THROW(parse_attrs(Op::Cast, {{"dtype", std::string("f33")}}), Error);
  // Floats take ints; ints do not take floats.
  EXPECT_EQ(std::get<EpsAttrs>(parse_attrs(Op::BatchNorm, {{"eps", 0}})).eps, 0.0);
  EXPECT_THROW(parse_attrs(Op::Softmax, {{"axis", 1.5}}), Error);
}

TEST(OpSchema, ActivationGradCarriesItsActivationsAttributes) {
  const auto g = std::get<ActivationGradAttrs>(
      parse_attrs(Op::ActivationGrad, {{"kind", std::string("hard_sigmoid")}, {"beta", 0.25}}));
  const auto hs = std::get<HardSigmoidAttrs>(activation_attrs(g));
  EXPECT_EQ(hs.beta, 0.25);
  EXPECT_EQ(hs.alpha, 1.0 / 6);  // hard_sigmoid's default, not elu's
  EXPECT_TRUE(activation_grad_attrs(Op::HardSigmoid, hs) == g);
  // An attribute the activation does not take, or a kind that is no activation.
  EXPECT_THROW(activation_attrs(std::get<ActivationGradAttrs>(parse_attrs(
                   Op::ActivationGrad, {{"kind", std::string("relu")}, {"alpha", 1.0}}))),
               Error);
  EXPECT_NE(testing::error_of([] {
              activation_attrs(std::get<ActivationGradAttrs>(
                  parse_attrs(Op::ActivationGrad, {{"kind", std::string("matmul")}})));
            }).find("not a unary activation"),
            std::string::npos);
}

TEST(OpSchema, GraphAddParsesAndNamesTheNode) {
  Graph g;
  NodeId x = g.input("x", Shape(Dims{2, 3}, DType::F32));
  const std::string msg = testing::error_of([&] {
    g.add(Op::Softmax, {x}, {{"axsi", 0}}, "probs", "aten.softmax");
  });
  EXPECT_NE(msg.find("node %1 (softmax 'probs') from aten.softmax"), std::string::npos) << msg;
  EXPECT_NE(msg.find("unknown attribute 'axsi'"), std::string::npos) << msg;
  EXPECT_EQ(g.size(), 1u);
  // Typed attributes skip the parser; the wrong set for the op is refused.
  NodeId y = g.add(Op::Softmax, {x}, SoftmaxAttrs{.axis = 0});
  EXPECT_EQ(g.node(y).attrs_as<SoftmaxAttrs>().axis, 0);
  EXPECT_THROW(g.add(Op::Softmax, {x}, ReduceAttrs{}), Error);
  EXPECT_THROW(g.node(y).attrs_as<ReduceAttrs>(), Error);
}

TEST(OpSchema, FamilyEnumsMatchTheOpTable) {
  EXPECT_EQ(family_op<UnaryOp>(Op::Relu), UnaryOp::Relu);
  EXPECT_EQ(family_op<UnaryOp>(Op::Clamp), UnaryOp::Clamp);
  EXPECT_EQ(family_op<BinaryOp>(Op::Fmod), BinaryOp::Fmod);
  EXPECT_EQ(family_op<CompareOp>(Op::Ge), CompareOp::Ge);
  EXPECT_EQ(family_op<ReduceOp>(Op::ReduceProd), ReduceOp::ReduceProd);
  EXPECT_EQ(family_op<LogicalOp>(Op::LogicalOr), LogicalOp::LogicalOr);
  EXPECT_NE(testing::error_of([] {
              family_op<UnaryOp>(Op::Add);
            }).find("'add' is a Binary op, not a Unary op"),
            std::string::npos);
  // Each family's enum numbers its ops 0, 1, 2, ... in table order.
  std::map<OpFamily, int> next;
  for (Op op : all_ops()) {
    EXPECT_EQ(op_family(op), op_info(op).family) << op_name(op);
    EXPECT_EQ(kFamilyIndex[size_t(op)], next[op_family(op)]++) << op_name(op);
  }
}

}  // namespace
}  // namespace rlx
