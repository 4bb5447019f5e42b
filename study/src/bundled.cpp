// The bundled kernels (attncheck_builtin), linked when the build has them.
#include "sections.h"

#include <string_view>

#ifdef ATTNCHECK_STUDY_HAVE_BUILTIN
extern "C" const attncheck_kernel *attncheck_kernels(int32_t *count);
#endif

namespace attncheck::study {

std::vector<const attncheck_kernel *> bundled_kernels() {
  std::vector<const attncheck_kernel *> out;
#ifdef ATTNCHECK_STUDY_HAVE_BUILTIN
  std::int32_t count = 0;
  const attncheck_kernel *k = attncheck_kernels(&count);
  for (std::int32_t i = 0; i < count; ++i) out.push_back(&k[i]);
#endif
  return out;
}

std::vector<const attncheck_kernel *> flash_kernels(const std::vector<const attncheck_kernel *> &kernels) {
  std::vector<const attncheck_kernel *> out;
  for (const auto *k : kernels)
    if (std::string_view(k->name).starts_with("flash")) out.push_back(k);
  return out;
}

}  // namespace attncheck::study
