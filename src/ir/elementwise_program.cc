#include "ir/elementwise_program.h"

#include <charconv>
#include <cmath>

#include "rlx/error.h"
#include "rlx/op_attrs.h"

namespace rlx {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

// Splits on `sep` (no nesting in this grammar).
std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  for (size_t at = 0;;) {
    const size_t end = s.find(sep, at);
    parts.push_back(trim(s.substr(at, end == std::string_view::npos ? end : end - at)));
    if (end == std::string_view::npos) return parts;
    at = end + 1;
  }
}

// The shortest text that reads back as the same double.
std::string number_text(double v) {
  char b[32];
  const auto r = std::to_chars(b, b + sizeof b, v);
  return std::string(b, r.ptr);
}

std::string value_text(const AttrValue& v) {
  if (const double* d = std::get_if<double>(&v)) return number_text(*d);
  if (const int64_t* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const bool* b = std::get_if<bool>(&v)) return *b ? "true" : "false";
  if (const std::string* s = std::get_if<std::string>(&v)) return *s;
  throw make_error("elementwise program: list attributes are not part of the grammar");
}

AttrValue parse_value(std::string_view s) {
  if (s == "true" || s == "false") return s == "true";
  double d = 0;
  // from_chars does not take "inf"'s sign form "+inf"; to_chars never writes it.
  const auto r = std::from_chars(s.data(), s.data() + s.size(), d);
  if (r.ec == std::errc() && r.ptr == s.data() + s.size()) return d;
  return std::string(s);
}

// The index of operand text "x3" / "t0" in the program's value numbering.
int parse_operand(std::string_view s, int inputs, int here) {
  int k = -1;
  const auto r = std::from_chars(s.data() + 1, s.data() + s.size(), k);
  const bool ok = s.size() >= 2 && r.ec == std::errc() && r.ptr == s.data() + s.size() && k >= 0;
  if (ok && s[0] == 'x') {
    RLX_CHECK(k < inputs, "operand ", s, " names input ", k, " of a node with ", inputs);
    return k;
  }
  if (ok && s[0] == 't') {
    RLX_CHECK(k < here, "operand ", s, " is not the result of an earlier instruction");
    return inputs + k;
  }
  throw make_error("operand '", s, "' is neither xK (an input) nor tK (an earlier result)");
}

EwInstr parse_instr(std::string_view text, const EwProgram& p) {
  const size_t open = text.find('(');
  RLX_CHECK(open != std::string_view::npos && text.back() == ')', "expected op(operands...), got '",
            text, "'");
  EwInstr in;
  in.op = parse_op(trim(text.substr(0, open)));
  RLX_CHECK(is_region_op(in.op), "'", op_name(in.op), "' cannot be part of an element-wise region");
  Attrs map;
  for (std::string_view item : split(text.substr(open + 1, text.size() - open - 2), ',')) {
    if (const size_t eq = item.find('='); eq != std::string_view::npos)
      map.set(std::string(trim(item.substr(0, eq))), parse_value(trim(item.substr(eq + 1))));
    else
      in.args.push_back(parse_operand(item, p.inputs, int(p.code.size())));
  }
  in.attrs = parse_attrs(in.op, map);
  const int arity = op_info(in.op).min_inputs;  // every region op takes a fixed count (ops.def)
  RLX_CHECK(int(in.args.size()) == arity, "'", op_name(in.op), "' takes ", arity, " operands, got ",
            in.args.size());
  if (in.op == Op::Softplus)
    RLX_CHECK(std::get<SoftplusAttrs>(in.attrs).beta != 0, "softplus beta must be non-zero");
  for (size_t a = 0; a < in.args.size(); ++a) {
    const bool want_mask = in.op == Op::Where && a == 0;
    RLX_CHECK(p.is_mask[size_t(in.args[a])] == want_mask, "operand ", a + 1, " of '",
              op_name(in.op), "' must be ", want_mask ? "a mask (bool)" : "f32");
  }
  return in;
}

}  // namespace

bool is_region_op(Op op) {
  const OpFamily f = op_family(op);
  return f == OpFamily::Unary || f == OpFamily::Binary || f == OpFamily::Compare || op == Op::Where;
}

std::string format_program(const EwProgram& p) {
  std::string s;
  for (const EwInstr& in : p.code) {
    s += (s.empty() ? "" : "; ") + std::string(op_name(in.op)) + "(";
    for (size_t a = 0; a < in.args.size(); ++a) {
      const int v = in.args[a];
      s += (a ? ", " : "") +
           (v < p.inputs ? "x" + std::to_string(v) : "t" + std::to_string(v - p.inputs));
    }
    const Attrs attrs = attrs_to_map(in.attrs, /*skip_defaults=*/true);
    for (const auto& [k, v] : attrs.items()) s += ", " + k + "=" + value_text(v);
    s += ")";
  }
  return s;
}

EwProgram parse_program(std::string_view text, const std::vector<DType>& input_types) {
  EwProgram p;
  p.inputs = int(input_types.size());
  RLX_CHECK(p.inputs >= 1 && p.inputs <= kMaxRegionInputs, "an element-wise region takes 1 to ",
            kMaxRegionInputs, " inputs, got ", p.inputs);
  for (DType t : input_types) {
    RLX_CHECK(t == DType::F32 || t == DType::Bool,
              "element-wise region inputs are f32 (or bool masks), got ", dtype_name(t));
    p.is_mask.push_back(t == DType::Bool);
  }
  const std::vector<std::string_view> lines = split(text, ';');
  RLX_CHECK(lines.size() <= size_t(kMaxRegionCode), "an element-wise region holds at most ",
            kMaxRegionCode, " instructions, got ", lines.size());
  for (std::string_view line : lines) {
    try {
      p.code.push_back(parse_instr(line, p));
    } catch (const Error& e) {
      throw make_error("instruction t", p.code.size(), " '", line, "': ", e.what());
    }
    p.is_mask.push_back(op_family(p.code.back().op) == OpFamily::Compare);
  }
  RLX_CHECK(!p.is_mask.back(), "the last instruction gives a mask; the region's result is f32");
  return p;
}

}  // namespace rlx
