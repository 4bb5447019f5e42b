// The baseline SIMD path's GEMM (products.h; gemm_path.inc).
#define ATTNCHECK_GEMM_PATH baseline
#define Eigen Eigen_baseline_path
#include "gemm_path.inc"
