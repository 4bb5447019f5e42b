// The AVX2 + FMA path's GEMM (products.h; gemm_path.inc), compiled with -mavx2 -mfma (reference/CMakeLists.txt).
#define ATTNCHECK_GEMM_PATH avx2
#define Eigen Eigen_avx2_path
#include "gemm_path.inc"
