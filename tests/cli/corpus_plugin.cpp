// libattncheck_test_corpus_plugin.so: one kernel, "corpus_demo", for the corpus tests (cli_corpus_test.cpp,
// tests/python/test_corpus.py): a kernel whose bug gets fixed under the same name. It is the variant kernel with the
// planted bug no_rescale (variant_kernels.h) — found by `check --seed 1 --cases 3 --properties accuracy --dtype f32`,
// missed by seed 2 — unless the environment sets ATTNCHECK_CORPUS_DEMO=fixed, when it is the same variant without the
// bug (a correct kernel). The environment is read at each call, so a sandboxed or forked process sees it too.
#include "attncheck/kernel_abi.h"
#include "variant_kernels.h"

#include <cstdlib>
#include <cstring>

namespace {

using attncheck::support::Bug;
using attncheck::support::Variant;

constexpr const char *kSwitch = "ATTNCHECK_CORPUS_DEMO";
constexpr const char *kFixed = "fixed";

/// The kernel of the moment: the fixed variant when the switch says so, else the buggy one.
const attncheck_kernel &current() {
  static const Variant buggy = attncheck::support::bug_variant(Bug::no_rescale);
  static const Variant fixed = [] {
    Variant v = buggy;
    v.bug = Bug::none;
    return v;
  }();
  const char *value = std::getenv(kSwitch);
  const bool is_fixed = value != nullptr && std::strcmp(value, kFixed) == 0;
  return attncheck::support::variant_kernel(is_fixed ? fixed : buggy);
}

int forward(const attncheck_params *params, const DLTensor *q, const DLTensor *k, const DLTensor *v, DLTensor *out,
            DLTensor *lse) {
  return current().forward(params, q, k, v, out, lse);
}

int backward(const attncheck_params *params, const DLTensor *q, const DLTensor *k, const DLTensor *v,
             const DLTensor *out, const DLTensor *lse, const DLTensor *dout, DLTensor *dq, DLTensor *dk,
             DLTensor *dv) {
  return current().backward(params, q, k, v, out, lse, dout, dq, dk, dv);
}

const char *last_error() {
  const attncheck_kernel &k = current();
  return k.last_error ? k.last_error() : nullptr;
}

const attncheck_kernel kKernel{ATTNCHECK_ABI_VERSION, "corpus_demo", forward, backward, last_error};

}  // namespace

extern "C" __attribute__((visibility("default"))) const attncheck_kernel *attncheck_kernels(int32_t *count) {
  if (count) *count = 1;
  return &kKernel;
}
