// Einsum: the equation parsed into a label per dim (ellipsis dims right-aligned, as NumPy
// broadcasts them), each operand's repeated labels reduced to their diagonal and its labels no
// one else needs summed away, then the operands contracted pairwise as batched matmuls
// ([batch, kept, summed] x [batch, summed, kept]) and the result summed and transposed to the
// output's labels. Matrix dims must be static (the contractions reshape).
#include <algorithm>
#include <cctype>
#include <map>
#include <numeric>
#include <set>

#include "frontends/onnx/context.h"
#include "rlx/checked.h"
#include "rlx/error.h"

namespace rlx::onnx {
namespace {

using Labels = std::vector<int>;
constexpr int kEllipsis = 1000;  // ellipsis dim k is label kEllipsis + k

struct Term {
  NodeId id;
  Labels labels;
};

int letter_label(char ch, const std::string& eq) {
  RLX_CHECK(std::isalpha(static_cast<unsigned char>(ch)), "Einsum: bad character '", ch,
            "' in equation '", eq, "'");
  return int(static_cast<unsigned char>(ch));  // ASCII: implicit output sorts like NumPy
}

// One term's labels; its ellipsis (at most one) stands for `rank - letters` dims, the last
// ones of the `total` ellipsis dims.
Labels parse_term(const std::string& term, int64_t rank, int64_t total, const std::string& eq) {
  Labels out;
  const size_t dots = term.find("...");
  const int64_t letters = int64_t(term.size()) - (dots == std::string::npos ? 0 : 3);
  RLX_CHECK(dots == std::string::npos || term.find("...", dots + 3) == std::string::npos,
            "Einsum: more than one ellipsis in '", term, "'");
  const int64_t ell = rank - letters;
  RLX_CHECK(dots == std::string::npos ? ell == 0 : ell >= 0, "Einsum: term '", term,
            "' does not fit an input of rank ", rank, " (equation '", eq, "')");
  for (size_t i = 0; i < term.size(); ++i) {
    if (i == dots) {
      for (int64_t k = 0; k < ell; ++k) out.push_back(kEllipsis + int(total - ell + k));
      i += 2;
      continue;
    }
    out.push_back(letter_label(term[i], eq));
  }
  return out;
}

class Einsum {
 public:
  Einsum(Ctx& c, std::string eq) : c_(c), eq_(std::move(eq)) {}

  NodeId lower() {
    eq_.erase(std::remove(eq_.begin(), eq_.end(), ' '), eq_.end());
    const size_t arrow = eq_.find("->");
    const std::string lhs = eq_.substr(0, arrow);
    std::vector<std::string> terms;
    for (size_t at = 0;;) {
      const size_t comma = lhs.find(',', at);
      terms.push_back(lhs.substr(at, comma == std::string::npos ? std::string::npos : comma - at));
      if (comma == std::string::npos) break;
      at = comma + 1;
    }
    RLX_CHECK(terms.size() == c_.num_inputs(), "Einsum: equation '", eq_, "' has ", terms.size(),
              " terms for ", c_.num_inputs(), " inputs");
    int64_t total = 0;  // ellipsis dims of the widest operand
    for (size_t i = 0; i < terms.size(); ++i) {
      const size_t dots = terms[i].find("...");
      if (dots != std::string::npos)
        total = std::max<int64_t>(total, c_.shape(i).rank() - int64_t(terms[i].size() - 3));
    }
    std::map<int, int> count;
    std::vector<Term> ops;
    for (size_t i = 0; i < terms.size(); ++i) {
      Term t{c_.in(i), parse_term(terms[i], c_.shape(i).rank(), total, eq_)};
      for (int l : t.labels) ++count[l];
      ops.push_back(diagonal(t));
    }
    Labels out;
    if (arrow != std::string::npos) {
      const std::string rhs = eq_.substr(arrow + 2);
      const int64_t letters = std::count_if(rhs.begin(), rhs.end(), [](char ch) {
        return std::isalpha(static_cast<unsigned char>(ch)) != 0;
      });
      // Without "..." in the output, the ellipsis dims are summed.
      out =
          parse_term(rhs, letters + (rhs.find("...") == std::string::npos ? 0 : total), total, eq_);
      RLX_CHECK(std::set<int>(out.begin(), out.end()).size() == out.size(), "Einsum: output of '",
                eq_, "' repeats a label");
    } else {  // implicit: the ellipsis, then the letters used once, in order
      for (int64_t k = 0; k < total; ++k) out.push_back(kEllipsis + int(k));
      for (const auto& [l, n] : count)
        if (l < kEllipsis && n == 1) out.push_back(l);
    }
    for (int l : out)
      RLX_CHECK(count.count(l), "Einsum: output label of '", eq_, "' is in no input");
    // Contract left to right, keeping the labels the output or a later operand needs.
    Term acc = ops[0];
    for (size_t i = 1; i <= ops.size(); ++i) {
      std::set<int> keep(out.begin(), out.end());
      for (size_t j = i; j < ops.size(); ++j)
        keep.insert(ops[j].labels.begin(), ops[j].labels.end());
      acc = sum_unneeded(acc, keep);
      if (i < ops.size()) acc = contract(acc, sum_unneeded(ops[i], with(keep, acc.labels)), keep);
    }
    // acc's labels are now exactly out's, in some order.
    std::vector<int64_t> perm;
    for (int l : out)
      perm.push_back(std::find(acc.labels.begin(), acc.labels.end(), l) - acc.labels.begin());
    bool identity = true;
    for (size_t k = 0; k < perm.size(); ++k) identity = identity && perm[k] == int64_t(k);
    return identity ? acc.id : c_.b().transpose(acc.id, perm);
  }

 private:
  static std::set<int> with(std::set<int> s, const Labels& more) {
    s.insert(more.begin(), more.end());
    return s;
  }

  Dims dims(NodeId id) {
    const Shape& s = c_.shape_of(id);
    RLX_CHECK(s.is_static(), "Einsum '", eq_, "' of ", s.str(), ": needs static dims");
    return s.concrete();
  }

  // A term with each repeated label reduced to its diagonal.
  Term diagonal(Term t) {
    for (size_t a = 0; a < t.labels.size(); ++a)
      for (size_t b = a + 1; b < t.labels.size(); ++b) {
        if (t.labels[a] != t.labels[b]) continue;
        const Dims d = dims(t.id);
        RLX_CHECK(d[a] == d[b], "Einsum '", eq_, "': a repeated label spans dims ", d[a], " and ",
                  d[b]);
        // The diagonal as a mask of i == j, broadcast over the other dims.
        Dims row(d.size(), 1), col(d.size(), 1);
        row[a] = d[a];
        col[b] = d[a];
        const NodeId i = c_.b().reshape(c_.b().arange(d[a]), row);
        const NodeId j = c_.b().reshape(c_.b().arange(d[a]), col);
        const NodeId zero = c_.scalar_const(0, c_.shape_of(t.id).dtype);
        const NodeId masked = c_.b().op(Op::Where, {c_.b().op(Op::Eq, {i, j}), t.id, zero});
        t.id = c_.b().reduce(Op::ReduceSum, masked, {int64_t(b)}, false);
        t.labels.erase(t.labels.begin() + int64_t(b));
        return diagonal(t);
      }
    return t;
  }

  // The term with its labels outside `keep` summed away.
  Term sum_unneeded(Term t, const std::set<int>& keep) {
    std::vector<int64_t> axes;
    Labels left;
    for (size_t k = 0; k < t.labels.size(); ++k) {
      if (keep.count(t.labels[k]))
        left.push_back(t.labels[k]);
      else
        axes.push_back(int64_t(k));
    }
    if (axes.empty()) return t;
    return {c_.b().reduce(Op::ReduceSum, t.id, axes, false), left};
  }

  // x's dims for `labels` (each present in x, or 1), as a transposed + reshaped view; sizes of
  // labels x lacks or holds as 1 are broadcast to `size`.
  NodeId arrange(const Term& t, const std::vector<Labels>& groups,
                 const std::map<int, int64_t>& size) {
    const Dims d = dims(t.id);
    std::vector<int64_t> perm;
    Dims full;  // every group's labels, x's dims expanded to the common sizes
    Dims grouped;
    for (const Labels& g : groups) {
      int64_t n = 1;
      for (int l : g) {
        const auto it = std::find(t.labels.begin(), t.labels.end(), l);
        RLX_CHECK(it != t.labels.end(), "Einsum: internal label bookkeeping");
        perm.push_back(it - t.labels.begin());
        full.push_back(size.at(l));
        n = checked_mul(n, size.at(l), "Einsum");
      }
      grouped.push_back(n);
    }
    NodeId x = t.id;
    bool identity = true;
    for (size_t k = 0; k < perm.size(); ++k) identity = identity && perm[k] == int64_t(k);
    if (!identity) x = c_.b().transpose(x, perm);
    Dims now;
    for (int64_t p : perm) now.push_back(d[size_t(p)]);
    if (now != full) x = c_.b().op(Op::Expand, {x}, {{"shape", full}});
    return c_.b().reshape(x, grouped);
  }

  // a and b contracted over their shared labels outside `keep`, batched over the shared ones
  // inside it: labels batch + a's own + b's own.
  Term contract(const Term& a, const Term& b, const std::set<int>& keep) {
    Labels batch, summed, a_own, b_own;
    std::map<int, int64_t> size;
    const Dims ad = dims(a.id), bd = dims(b.id);
    for (size_t k = 0; k < a.labels.size(); ++k) size[a.labels[k]] = ad[k];
    for (size_t k = 0; k < b.labels.size(); ++k) {
      int64_t& s = size.try_emplace(b.labels[k], bd[k]).first->second;
      RLX_CHECK(s == bd[k] || s == 1 || bd[k] == 1, "Einsum '", eq_, "': label sizes ", s, " and ",
                bd[k], " do not broadcast");
      s = std::max(s, bd[k]);
    }
    for (int l : a.labels) {
      const bool shared = std::count(b.labels.begin(), b.labels.end(), l) > 0;
      (shared ? (keep.count(l) ? batch : summed) : a_own).push_back(l);
    }
    for (int l : b.labels)
      if (!std::count(a.labels.begin(), a.labels.end(), l)) b_own.push_back(l);
    const NodeId x = arrange(a, {batch, a_own, summed}, size);
    const NodeId y = arrange(b, {batch, summed, b_own}, size);
    Dims out;
    Labels labels;
    for (const Labels* g : {&batch, &a_own, &b_own})
      for (int l : *g) {
        out.push_back(size.at(l));
        labels.push_back(l);
      }
    return {c_.b().reshape(c_.b().matmul(x, y), out), labels};
  }

  Ctx& c_;
  std::string eq_;
};

}  // namespace

void register_einsum(Registry& r) {
  r.add("Einsum", [](Ctx& c) {
    RLX_CHECK(c.num_inputs() >= 1, "Einsum needs at least one input");
    return std::vector<Val>{node_val(Einsum(c, c.s("equation", "")).lower())};
  });
}

}  // namespace rlx::onnx
