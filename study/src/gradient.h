// Section 3's double-precision attention backward for one head (internal; tests cross-check it).
#pragma once

#include <vector>

namespace attncheck::study {

/// One head: Q [L,d], K [L,d], V [L,d], dO [L,d] row-major, logits scale·QKᵀ.
struct HeadProblem {
  int L = 0, d = 0;
  double scale = 1;
  std::vector<double> q, k, v, dout;
};
struct HeadGradient {
  std::vector<double> dq;     ///< [L,d]
  double jac_spectral = 0;    ///< mean over rows of ‖diag(p) − ppᵀ‖₂
  double jac_frobenius = 0;   ///< mean over rows of ‖diag(p) − ppᵀ‖_F
  std::vector<double> row_jac_spectral;  ///< per row
};

/// dQ = scale · dS · K with P = softmax(scale·QKᵀ), dP = dO·Vᵀ, dS_ij = P_ij (dP_ij − Σ_l P_il dP_il).
HeadGradient head_backward(const HeadProblem &p);

/// ‖diag(p) − ppᵀ‖₂: the largest eigenvalue λ of the rank-one downdate of diag(p). With p sorted descending,
/// p₂ ≤ λ ≤ p₁ and λ solves the secular equation 1 = Σ_i p_i² / (p_i − λ) (whose right side increases in λ);
/// found by bisection. λ = p₁ when p₁ = p₂.
double softmax_jacobian_spectral(std::vector<double> p);
/// ‖diag(p) − ppᵀ‖_F = √(Σp_i² − 2Σp_i³ + (Σp_i²)²).
double softmax_jacobian_frobenius(const std::vector<double> &p);

}  // namespace attncheck::study
