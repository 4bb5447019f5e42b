#include "attncheck/problem.h"

#include <sstream>
#include <stdexcept>

namespace attncheck {

std::string_view mask_name(Mask m) {
  switch (m) {
    case Mask::causal: return "causal";
    case Mask::causal_top_left: return "causal_top_left";
    default: return "none";
  }
}

void Shape::validate() const {
  auto need = [](bool ok, const char *what) {
    if (!ok) throw std::invalid_argument(what);
  };
  need(B >= 1 && Hq >= 1 && Hkv >= 1 && D >= 1 && Dv >= 1,
       "B, Hq, Hkv, D and Dv must be at least 1 (Lq and Lk may be 0: SPEC.md §2.3)");
  need(Lq >= 0 && Lk >= 0, "Lq and Lk must not be negative");
  if (Hq % Hkv != 0)
    throw std::invalid_argument("Hq = " + std::to_string(Hq) + " is not a multiple of Hkv = " + std::to_string(Hkv) +
                                " (GQA needs query heads in equal groups per kv head)");
}

std::string Shape::describe() const {
  std::ostringstream os;
  os << "B=" << B << " Hq=" << Hq << " Hkv=" << Hkv << " Lq=" << Lq << " Lk=" << Lk << " D=" << D << " Dv=" << Dv;
  return os.str();
}

namespace {
template <class Dims>
bool shape_of_dims(int rq, int rk, int rv, Dims q, Dims k, Dims v, Shape *s, std::string *why) {
  auto fail = [&](std::string msg) {
    *why = std::move(msg);
    return false;
  };
  if (rq != 4 || rk != 4 || rv != 4)
    return fail("q, k and v must be rank 4 ([B,H,L,D]); got ranks " + std::to_string(rq) + ", " +
                std::to_string(rk) + ", " + std::to_string(rv));
  if (q[0] != k[0] || k[0] != v[0])
    return fail("batch sizes differ: q has B=" + std::to_string(q[0]) + ", k " + std::to_string(k[0]) + ", v " +
                std::to_string(v[0]));
  if (k[1] != v[1])
    return fail("kv heads differ: k has Hkv=" + std::to_string(k[1]) + ", v " + std::to_string(v[1]));
  if (k[2] != v[2])
    return fail("key lengths differ: k has Lk=" + std::to_string(k[2]) + ", v " + std::to_string(v[2]));
  if (q[3] != k[3])
    return fail("head dims differ: q has D=" + std::to_string(q[3]) + ", k has D=" + std::to_string(k[3]));
  *s = Shape{q[0], q[1], k[1], q[2], k[2], q[3], v[3]};
  try {
    s->validate();
  } catch (const std::invalid_argument &e) {
    return fail(e.what());
  }
  return true;
}
}  // namespace

Shape shape_of(const Tensor &q, const Tensor &k, const Tensor &v, const Tensor *dout) {
  Shape s;
  std::string why;
  if (!shape_of_dims(q.rank(), k.rank(), v.rank(), q.shape().data(), k.shape().data(), v.shape().data(), &s, &why))
    throw std::invalid_argument(why);
  if (q.dtype() != k.dtype() || q.dtype() != v.dtype())
    throw std::invalid_argument("q, k and v must share one dtype; got " + std::string(dtype_name(q.dtype())) + ", " +
                                std::string(dtype_name(k.dtype())) + ", " + std::string(dtype_name(v.dtype())));
  if (dout) {
    const std::vector<std::int64_t> want{s.B, s.Hq, s.Lq, s.Dv};
    if (dout->shape() != want)
      throw std::invalid_argument("dout must have the output's shape [B,Hq,Lq,Dv] = [" + std::to_string(s.B) + "," +
                                  std::to_string(s.Hq) + "," + std::to_string(s.Lq) + "," + std::to_string(s.Dv) +
                                  "]; got " + dout->describe());
  }
  return s;
}

bool shape_of(const DLTensor &q, const DLTensor &k, const DLTensor &v, Shape *out, std::string *why) {
  return shape_of_dims(q.ndim, k.ndim, v.ndim, q.shape, k.shape, v.shape, out, why);
}

}  // namespace attncheck
