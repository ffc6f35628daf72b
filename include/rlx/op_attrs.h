// The op enum, op families and typed attributes, generated from ops.def.
//
// Each attribute set of ops.def becomes a struct (RopeAttrs{theta, style,
// rotary_dims}); a node holds one in `OpAttrs`. Kernels, shape inference and
// lowerings read fields; the one parser (parse_attrs) turns an untyped Attrs
// map (JSON, builders, importers) into the op's struct, rejecting unknown
// keys, wrong kinds and bad enum values, so a misspelt key never silently
// gets the default.
#pragma once
#include <array>
#include <climits>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "rlx/attrs.h"
#include "rlx/dtype.h"

namespace rlx {

enum class Op : uint16_t {
#define RLX_OP(e, ...) e,
#include "rlx/ops.def"
#undef RLX_OP
};

// ---- enumerations of string-valued attributes
#define RLX_ENUM(T, ...) enum class T : uint8_t { __VA_ARGS__ };
#include "rlx/ops.def"
#undef RLX_ENUM

// Names of an attribute enum's values, in declaration order.
template <typename E>
struct EnumInfo;
#define RLX_ENUM(T, ...)                                     \
  template <>                                                \
  struct EnumInfo<T> {                                       \
    static constexpr std::string_view type = #T;             \
    static constexpr std::string_view values = #__VA_ARGS__; \
  };
#include "rlx/ops.def"
#undef RLX_ENUM

template <typename E>
concept AttrEnum = requires {
  EnumInfo<E>::values;
};

// "neox" for RopeStyle::neox; the list of valid names for error messages.
std::string_view enum_value_name(std::string_view values, int index);
int parse_enum_value(std::string_view type, std::string_view values, std::string_view name);
template <AttrEnum E>
std::string_view to_string(E e) {
  return enum_value_name(EnumInfo<E>::values, int(e));
}
template <AttrEnum E>
E parse_enum(std::string_view name) {
  return E(parse_enum_value(EnumInfo<E>::type, EnumInfo<E>::values, name));
}

// ---- typed attribute structs
#define INT(name, ...) int64_t name{__VA_ARGS__};
#define FLOAT(name, ...) double name{__VA_ARGS__};
#define BOOL(name, ...) bool name{__VA_ARGS__};
#define STR(name, ...) std::string name{__VA_ARGS__};
#define INTS(name, ...) std::vector<int64_t> name;
#define FLOATS(name, ...) std::vector<double> name;
#define ENUM(name, T, def) T name{T::def};
#define DTYPE(name, ...) DType name{__VA_OPT__(DType::__VA_ARGS__)};
#define OPT_INT(name) std::optional<int64_t> name;
#define OPT_FLOAT(name) std::optional<double> name;
#define OP(name) Op name{};
#define RLX_ATTRS(S, ...)                             \
  struct S##Attrs {                                   \
    __VA_ARGS__                                       \
    bool operator==(const S##Attrs&) const = default; \
  };
#include "rlx/ops.def"
#undef RLX_ATTRS
#undef INT
#undef FLOAT
#undef BOOL
#undef STR
#undef INTS
#undef FLOATS
#undef ENUM
#undef DTYPE
#undef OPT_INT
#undef OPT_FLOAT
#undef OP

// A node's attributes: one struct of the op's set. monostate only in a node
// under construction.
using OpAttrs = std::variant<std::monostate
#define RLX_ATTRS(S, ...) , S##Attrs
#include "rlx/ops.def"
#undef RLX_ATTRS
                             >;

template <typename T, typename V>
struct IsAlternative : std::false_type {};
template <typename T, typename... Ts>
struct IsAlternative<T, std::variant<Ts...>> : std::bool_constant<(std::is_same_v<T, Ts> || ...)> {
};
// One of the generated attribute structs.
template <typename T>
concept AttrStruct = IsAlternative<T, OpAttrs>::value && !std::is_same_v<T, std::monostate>;

// An optional list attribute's value: `v`, or `count` copies of `fill` when
// it is empty (conv stride/pads/dilation and friends).
inline std::vector<int64_t> list_or(const std::vector<int64_t>& v, size_t count, int64_t fill) {
  return v.empty() ? std::vector<int64_t>(count, fill) : v;
}

// slice's bounds with Python's defaults for an absent one: the whole axis in
// the step's direction (before clamping to the axis).
inline int64_t slice_start(const SliceAttrs& a) {
  return a.start.value_or(a.step > 0 ? 0 : INT64_MAX);
}
inline int64_t slice_end(const SliceAttrs& a) {
  return a.end.value_or(a.step > 0 ? INT64_MAX : INT64_MIN);
}
// max_pool2d / avg_pool2d stride: the kernel when empty (PyTorch's default).
template <typename PoolAttrs>
const std::vector<int64_t>& pool_stride(const PoolAttrs& a) {
  return a.stride.empty() ? a.kernel : a.stride;
}

// A conv node's inputs: (x, w[, bias][, residual]); the residual is there
// when the attribute says so, the bias when one input more than x and w is.
inline bool conv_has_bias(bool residual, size_t inputs) { return inputs - (residual ? 1 : 0) == 3; }
// The same for a matmul's (a, b[, bias][, residual]).
inline bool matmul_has_bias(bool residual, size_t inputs) {
  return inputs - (residual ? 1 : 0) == 3;
}

// conv_blocked's layout: activations [N, conv_channel_blocks(C), H, W, kConvChannelBlock].
inline constexpr int64_t kConvChannelBlock = 16;
constexpr int64_t conv_channel_blocks(int64_t c) {
  return (c + kConvChannelBlock - 1) / kConvChannelBlock;
}

// Stage 0 (expand), 1 (depthwise) or 2 (project) of a conv_blocked_chain as the conv_blocked
// node it stands for.
inline ConvBlockedAttrs conv_chain_stage(const ConvBlockedChainAttrs& a, int stage) {
  if (stage == 1)
    return {.stride = a.stride,
            .pads = a.pads,
            .channels = a.hidden,
            .out_channels = a.hidden,
            .depthwise = true,
            .activation = a.depthwise_activation};
  return {.stride = {1, 1},
          .pads = {0, 0, 0, 0},
          .channels = stage == 0 ? a.channels : a.hidden,
          .out_channels = stage == 0 ? a.hidden : a.out_channels,
          .activation = stage == 0 ? a.expand_activation : a.activation,
          .residual = stage == 2 && a.residual};
}
// That stage's inputs, as conv_chain_stage's node reads them, from a conv_blocked_chain's
// inputs `in` (x, then a weight and a bias per stage[, residual]) and the stage's input x.
template <class T>
std::vector<T> conv_chain_stage_inputs(const ConvBlockedChainAttrs& a, int stage, T x,
                                       const std::vector<T>& in) {
  std::vector<T> s{x, in[size_t(1 + 2 * stage)], in[size_t(2 + 2 * stage)]};
  if (stage == 2 && a.residual) s.push_back(in[7]);
  return s;
}

// Default attributes of `op` (required fields zero/empty).
OpAttrs default_attrs(Op op);
// The one attribute parser: untyped map -> the op's struct. Throws rlx::Error
// naming the op, the key and what it accepts.
OpAttrs parse_attrs(Op op, const Attrs& map);
// Back to an untyped map (for JSON and printing). With `skip_defaults`, fields
// equal to their default are left out; unset optional fields always are.
Attrs attrs_to_map(const OpAttrs& a, bool skip_defaults = false);
// "theta: float = 10000, style: neox|interleaved = neox, rotary_dims: int (optional)"
std::string attrs_schema(Op op);
// Whether `a` holds the set ops.def declares for `op`.
bool attrs_match(Op op, const OpAttrs& a);
// activation_grad carries its activation's attributes: the kind's own struct
// (EluAttrs, ClampAttrs, ...; NoAttrs for most) from them, and back.
OpAttrs activation_attrs(const ActivationGradAttrs& g);
ActivationGradAttrs activation_grad_attrs(Op kind, const OpAttrs& activation);

// ---- op families (the family column of ops.def)
#define RLX_OP_FAMILIES                                                                          \
  Leaf, Unary, Logical, Binary, Compare, Select, Convert, Reduce, ArgReduce, Softmax, Scan,      \
      Movement, Indexing, Linear, Conv, Pool, Norm, Attention, Resample, Grad, Random, Quantize, \
      Recurrent, Fused, Tuple, Special, Linalg, DataDependent, Control
#define RLX_STRINGIZE_(...) #__VA_ARGS__
#define RLX_STRINGIZE(...) RLX_STRINGIZE_(__VA_ARGS__)
enum class OpFamily : uint8_t { RLX_OP_FAMILIES };
template <>
struct EnumInfo<OpFamily> {
  static constexpr std::string_view type = "op family";
  static constexpr std::string_view values = RLX_STRINGIZE(RLX_OP_FAMILIES);
};
#undef RLX_STRINGIZE
#undef RLX_STRINGIZE_
#undef RLX_OP_FAMILIES

// Per-family op enums (UnaryOp::Relu, ...), so that a kernel covering a
// family switches over exactly its ops with no default: a new op in the
// family is a compile error (-Wswitch) until handled. `family_op<UnaryOp>(op)`
// converts and throws rlx::Error for an op of another family.
//
// RLX_WHEN_FAMILY(fam, F)(tokens) keeps `tokens` only when fam is F (a
// preprocessor equality test: RLX_SAME_F_F exists only for equal names).
#define RLX_SAME_Unary_Unary ~, 1
#define RLX_SAME_Binary_Binary ~, 1
#define RLX_SAME_Compare_Compare ~, 1
#define RLX_SAME_Reduce_Reduce ~, 1
#define RLX_SAME_Logical_Logical ~, 1
#define RLX_SECOND(a, b, ...) b
#define RLX_SECOND_(...) RLX_SECOND(__VA_ARGS__)
#define RLX_IS_SAME(a, b) RLX_SECOND_(RLX_SAME_##a##_##b, 0, ~)
#define RLX_WHEN_0(...)
#define RLX_WHEN_1(...) __VA_ARGS__
#define RLX_WHEN_(c) RLX_WHEN_##c
#define RLX_WHEN(c) RLX_WHEN_(c)
#define RLX_WHEN_FAMILY(fam, F) RLX_WHEN(RLX_IS_SAME(fam, F))

inline constexpr OpFamily kOpFamily[] = {
#define RLX_OP(e, name, fam, ...) OpFamily::fam,
#include "rlx/ops.def"
#undef RLX_OP
};
// Position of each op among the ops of its family, in table order: the
// value of its per-family enumerator.
inline constexpr auto kFamilyIndex = [] {
  std::array<uint16_t, std::size(kOpFamily)> idx{};
  for (size_t i = 0; i < idx.size(); ++i)
    for (size_t j = 0; j < i; ++j) idx[i] += kOpFamily[j] == kOpFamily[i];
  return idx;
}();
constexpr OpFamily op_family(Op op) { return kOpFamily[size_t(op)]; }
[[noreturn]] void throw_not_in_family(Op op, OpFamily want);

template <typename F>
struct FamilyOf;
template <typename F>
F family_op(Op op) {
  if (op_family(op) != FamilyOf<F>::family) throw_not_in_family(op, FamilyOf<F>::family);
  return F(kFamilyIndex[size_t(op)]);
}

#define RLX_OP(e, name, fam, ...) RLX_WHEN_FAMILY(fam, Unary)(e, )
enum class UnaryOp : uint16_t {
#include "rlx/ops.def"
};
#undef RLX_OP
#define RLX_OP(e, name, fam, ...) RLX_WHEN_FAMILY(fam, Binary)(e, )
enum class BinaryOp : uint16_t {
#include "rlx/ops.def"
};
#undef RLX_OP
#define RLX_OP(e, name, fam, ...) RLX_WHEN_FAMILY(fam, Compare)(e, )
enum class CompareOp : uint16_t {
#include "rlx/ops.def"
};
#undef RLX_OP
#define RLX_OP(e, name, fam, ...) RLX_WHEN_FAMILY(fam, Reduce)(e, )
enum class ReduceOp : uint16_t {
#include "rlx/ops.def"
};
#undef RLX_OP
#define RLX_OP(e, name, fam, ...) RLX_WHEN_FAMILY(fam, Logical)(e, )
enum class LogicalOp : uint16_t {
#include "rlx/ops.def"
};
#undef RLX_OP
// clang-format off
template <> struct FamilyOf<UnaryOp> { static constexpr OpFamily family = OpFamily::Unary; };
template <> struct FamilyOf<BinaryOp> { static constexpr OpFamily family = OpFamily::Binary; };
template <> struct FamilyOf<CompareOp> { static constexpr OpFamily family = OpFamily::Compare; };
template <> struct FamilyOf<ReduceOp> { static constexpr OpFamily family = OpFamily::Reduce; };
template <> struct FamilyOf<LogicalOp> { static constexpr OpFamily family = OpFamily::Logical; };
// clang-format on

}  // namespace rlx
