#include "attncheck/case.h"

#include "attncheck/compare.h"
#include "attncheck/stretch.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <ostream>
#include <stdexcept>

namespace attncheck {

std::string_view family_name(Family f) {
  switch (f) {
    case Family::small_ints: return "small_ints";
    case Family::uniform: return "uniform";
    case Family::normal: return "normal";
    case Family::large: return "large";
    case Family::near_ties: return "near_ties";
    case Family::dominant_key: return "dominant_key";
    case Family::outliers: return "outliers";
    case Family::extremes: return "extremes";
  }
  return "?";
}

Family value_family_of_v(Family f) {
  switch (f) {
    case Family::large:
    case Family::near_ties:
    case Family::dominant_key: return Family::normal;
    default: return f;
  }
}

std::string_view operand_name(Operand o) {
  switch (o) {
    case Operand::q: return "q";
    case Operand::k: return "k";
    case Operand::v: return "v";
    case Operand::out: return "out";
    case Operand::lse: return "lse";
    case Operand::dout: return "dout";
  }
  return "?";
}

std::string TensorLayouts::describe() const {
  std::string out;
  for (int x = 0; x < kOperandCount; ++x) {
    const TensorLayout &t = of[static_cast<std::size_t>(x)];
    if (!t.own()) continue;
    out += (out.empty() ? "" : " ") + std::string(operand_name(static_cast<Operand>(x))) + "=";
    if (t.layout) out += layout_name(*t.layout);
    if (t.broadcast != Broadcast::none)
      out += std::string(t.layout ? "," : "") + "expand-" + std::string(broadcast_name(t.broadcast));
  }
  return out;
}

Layout CaseSpec::layout_of(Operand o) const {
  if (layouts[o].layout) return *layouts[o].layout;
  return o == Operand::lse || o == Operand::dout ? Layout::bhld : layout;
}

std::string CaseSpec::describe() const {
  return std::string(dtype_name(dtype)) + " " + shape.describe() + " mask=" + std::string(mask_name(mask)) +
         " layout=" + std::string(layout_name(layout)) + " values=" + std::string(family_name(family)) +
         (stretch.active() ? " stretched to Lq=" + std::to_string(stretch.Lq) + " Lk=" + std::to_string(stretch.Lk)
                           : "") +
         (features.active() ? " " + features.describe() : "") +
         (layouts.any() ? " layouts " + layouts.describe() : "");
}

Shape CaseSpec::problem_shape() const { return stretch.active() ? stretched_shape(*this) : shape; }

double CaseSpec::scale() const { return default_scale(problem_shape().D); }

std::int64_t CaseSpec::work() const { return problem_shape().work(); }

namespace {
std::vector<std::int64_t> q_shape(const Shape &s) { return {s.B, s.Hq, s.Lq, s.D}; }
std::vector<std::int64_t> k_shape(const Shape &s) { return {s.B, s.Hkv, s.Lk, s.D}; }
std::vector<std::int64_t> v_shape(const Shape &s) { return {s.B, s.Hkv, s.Lk, s.Dv}; }
std::vector<std::int64_t> o_shape(const Shape &s) { return {s.B, s.Hq, s.Lq, s.Dv}; }
std::size_t count(const std::vector<std::int64_t> &shape) {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return static_cast<std::size_t>(n);
}

/// The four dims of each value vector, by operand (out and lse hold no values).
std::vector<std::int64_t> dims_of(const Shape &s, Operand o) {
  switch (o) {
    case Operand::q: return q_shape(s);
    case Operand::k: return k_shape(s);
    case Operand::v: return v_shape(s);
    default: return o_shape(s);
  }
}

/// Visits, for a [d0, d1, d2, d3] row-major vector broadcast on dimension `bd`, every run of elements that must
/// equal the matching run of slice 0: f(first element of the run, first element of slice 0's run, length).
template <class F>
void for_each_broadcast_run(const std::vector<std::int64_t> &dims, Broadcast b, F &&f) {
  const int bd = broadcast_dim(b);
  if (bd < 0) return;
  std::int64_t outer = 1, inner = 1;
  for (int d = 0; d < bd; ++d) outer *= dims[static_cast<std::size_t>(d)];
  for (int d = bd + 1; d < 4; ++d) inner *= dims[static_cast<std::size_t>(d)];
  const std::int64_t n = dims[static_cast<std::size_t>(bd)];
  for (std::int64_t o = 0; o < outer; ++o)
    for (std::int64_t i = 1; i < n; ++i)
      f(static_cast<std::size_t>((o * n + i) * inner), static_cast<std::size_t>(o * n * inner),
        static_cast<std::size_t>(inner));
}

bool equal_along(const std::vector<double> &values, const std::vector<std::int64_t> &dims, Broadcast b) {
  bool equal = true;
  for_each_broadcast_run(dims, b, [&](std::size_t at, std::size_t from, std::size_t n) {
    equal = equal && std::memcmp(values.data() + at, values.data() + from, n * sizeof(double)) == 0;
  });
  return equal;
}

/// An input in `layout` (broadcast on `b` when its values allow it), padding NaN.
Tensor input(Dtype dt, std::vector<std::int64_t> shape, Layout layout, Broadcast b, const std::vector<double> &values) {
  if (b != Broadcast::none && !equal_along(values, shape, b)) b = Broadcast::none;  // a derived case: materialized
  Tensor t = Tensor::expanded(dt, std::move(shape), layout, b, Case::kInputPad);
  t.fill_storage(std::numeric_limits<double>::quiet_NaN());  // padding stays NaN: reads of it become visible
  t.assign(values);
  return t;
}

bool same_bits(const std::vector<double> &a, const std::vector<double> &b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
}

void print_tensor(std::string &out, const char *name, const std::vector<std::int64_t> &shape,
                  const std::vector<double> &values, std::size_t max_values) {
  out += "  ";
  out += name;
  out += " [";
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (d) out += ",";
    out += std::to_string(shape[d]);
  }
  out += "]:";
  const std::size_t shown = std::min(values.size(), max_values);
  for (std::size_t x = 0; x < shown; ++x) {
    out += (x % static_cast<std::size_t>(shape.back()) == 0) ? "\n    " : "  ";
    out += hex_and_decimal(values[x]);
  }
  if (shown < values.size()) out += "\n    … " + std::to_string(values.size() - shown) + " more";
  out += "\n";
}
}  // namespace

Problem Case::problem() const {
  if (spec.stretch.active()) return stretched_problem(*this);
  const Shape &s = spec.shape;
  s.validate();
  Problem p;
  p.shape = s;
  p.params.scale = default_scale(s.D);
  p.params.mask = spec.mask;
  p.features = features_of(spec);
  auto send = [&](Operand o, const std::vector<double> &values) {
    return input(spec.dtype, dims_of(s, o), spec.layout_of(o), spec.broadcast_of(o), values);
  };
  if (p.features.fp8) {
    auto fp8 = [&](std::vector<double> xs) {
      for (double &x : xs) x = fp8_value(*p.features.fp8, x);
      return xs;
    };
    p.q = send(Operand::q, fp8(q));
    p.k = send(Operand::k, fp8(k));
    p.v = send(Operand::v, fp8(v));
  } else {
    p.q = send(Operand::q, q);
    p.k = send(Operand::k, k);
    p.v = send(Operand::v, v);
  }
  if (!dout.empty()) {
    if (spec.layouts[Operand::dout].own()) {
      p.dout = send(Operand::dout, dout);
    } else {
      p.dout = Tensor::contiguous(spec.dtype, o_shape(s));
      p.dout->assign(dout);
    }
  }
  p.out_layout = spec.layouts[Operand::out].layout;
  p.lse_layout = spec.layouts[Operand::lse].layout;
  return p;
}

void Case::resize_values(bool backward) {
  const Shape &s = spec.shape;
  q.resize(count(q_shape(s)));
  k.resize(count(k_shape(s)));
  v.resize(count(v_shape(s)));
  if (backward)
    dout.resize(count(o_shape(s)));
  else
    dout.clear();
}

std::vector<double> Case::flat() const {
  std::vector<double> all;
  all.reserve(q.size() + k.size() + v.size() + dout.size());
  for (const auto *t : {&q, &k, &v, &dout}) all.insert(all.end(), t->begin(), t->end());
  return all;
}

void Case::set_flat(const std::vector<double> &values) {
  if (values.size() != q.size() + k.size() + v.size() + dout.size())
    throw std::invalid_argument("Case::set_flat: size differs");
  auto at = values.begin();
  for (auto *t : {&q, &k, &v, &dout}) {
    std::copy(at, at + static_cast<std::ptrdiff_t>(t->size()), t->begin());
    at += static_cast<std::ptrdiff_t>(t->size());
  }
}

namespace {
constexpr std::array<Operand, 4> kValueOperands{Operand::q, Operand::k, Operand::v, Operand::dout};
/// The values of input `o` (q, k, v or dout) of a case, const or not.
template <class C>
auto &values_of(C &c, Operand o) {
  return o == Operand::q ? c.q : (o == Operand::k ? c.k : (o == Operand::v ? c.v : c.dout));
}
}  // namespace

void Case::broadcast_values() {
  for (Operand o : kValueOperands) {
    std::vector<double> &t = values_of(*this, o);
    if (t.empty()) continue;
    for_each_broadcast_run(dims_of(spec.shape, o), spec.broadcast_of(o), [&](std::size_t at, std::size_t from,
                                                                             std::size_t n) {
      std::copy_n(t.begin() + static_cast<std::ptrdiff_t>(from), n, t.begin() + static_cast<std::ptrdiff_t>(at));
    });
  }
}

bool Case::broadcast_consistent() const {
  for (Operand o : kValueOperands) {
    const std::vector<double> &t = values_of(*this, o);
    if (!t.empty() && !equal_along(t, dims_of(spec.shape, o), spec.broadcast_of(o))) return false;
  }
  return true;
}

bool Case::same_as(const Case &o) const {
  return spec == o.spec && same_bits(q, o.q) && same_bits(k, o.k) && same_bits(v, o.v) && same_bits(dout, o.dout);
}

std::string Case::describe(std::size_t max_values_per_tensor) const {
  const Shape &s = spec.shape;
  std::string out = spec.describe() + " scale=" + hex_and_decimal(spec.scale()) + "\n";
  if (spec.stretch.active()) out += describe_stretch(*this) + "\n";
  print_tensor(out, "q", q_shape(s), q, max_values_per_tensor);
  print_tensor(out, "k", k_shape(s), k, max_values_per_tensor);
  print_tensor(out, "v", v_shape(s), v, max_values_per_tensor);
  if (!dout.empty()) print_tensor(out, "dout", o_shape(s), dout, max_values_per_tensor);
  return out;
}

bool CaseOptions::admits(const CaseSpec &s) const {
  if ((s.features.bits & features) != features || (s.features.bits & ~(features | combinable))) return false;
  return admits_shape(s);
}

bool CaseOptions::admits_shape(const CaseSpec &s) const {
  if (s.stretch.active() != stretch) return false;
  if (s.stretch.active() && (s.stretch.Lk < s.shape.Lk || s.stretch.Lq < s.shape.Lq)) return false;
  if (s.shape.Lk < least_keys()) return false;
  if (!empty_rows) return true;
  const Shape ps = s.problem_shape();
  return *empty_rows == (s.mask == Mask::causal && ps.Lq > ps.Lk);
}

void showValue(const Case &c, std::ostream &os) { os << c.spec.describe(); }

Case with_hidden_poison(const Case &c, std::int64_t row, double poison) {
  if (!is_causal(c.spec.mask)) throw std::invalid_argument("with_hidden_poison: the case is not causal");
  const Shape &s = c.spec.shape;
  if (row < 0 || row >= s.Lq) throw std::invalid_argument("with_hidden_poison: row out of range");
  Case out = c;
  // Rows ≤ row see keys j ≤ last_visible(row).
  const std::int64_t first_hidden = last_visible(c.spec.mask, row, s.Lq, s.Lk) + 1;
  for (std::int64_t b = 0; b < s.B; ++b)
    for (std::int64_t h = 0; h < s.Hkv; ++h)
      for (std::int64_t j = std::max<std::int64_t>(first_hidden, 0); j < s.Lk; ++j) {
        for (std::int64_t d = 0; d < s.D; ++d)
          out.k[static_cast<std::size_t>(((b * s.Hkv + h) * s.Lk + j) * s.D + d)] = poison;
        for (std::int64_t d = 0; d < s.Dv; ++d)
          out.v[static_cast<std::size_t>(((b * s.Hkv + h) * s.Lk + j) * s.Dv + d)] = poison;
      }
  return out;
}

}  // namespace attncheck
