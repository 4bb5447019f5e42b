// The fork server's protocol: fixed-size messages over a SOCK_STREAM socketpair; tensors in a memfd both sides map.
#pragma once

#include <dlpack/dlpack.h>

#include "attncheck/kernel_abi.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace attncheck::sandbox::wire {

constexpr std::uint32_t kMagic = 0x5a4e4431;  // guards against reading a misaligned stream
constexpr int kMaxRank = 8;                   // DLTensor rank the protocol carries
constexpr int kMaxTensors = 9;                // q k v out lse dout dq dk dv
/// ABI 1.2: the tensors of attncheck_args, in this order (a fault names them so).
constexpr int kMaxArgTensors = 8;
constexpr const char *kArgTensorNames[kMaxArgTensors] = {"alibi_slopes", "sinks",     "attn_mask", "cu_seqlens_q",
                                                         "cu_seqlens_k", "block_table", "seqused_k", "dropout_mask"};
constexpr int kDropoutMaskArg = 7;  ///< the one args tensor forward writes
constexpr int kNameBytes = 128;
constexpr int kMessageBytes = 1024;

/// First message of the server: the plugin's kernels, or why it could not be loaded.
struct Hello {
  std::uint32_t magic;
  std::int32_t count;  ///< number of KernelInfo that follow; -1 when the plugin could not be loaded
  char error[kMessageBytes];
};
struct KernelInfo {
  std::uint32_t abi_version;
  std::uint8_t has_forward, has_backward, has_last_error;
  char name[kNameBytes];  ///< truncated; the parent checks uniqueness on the full name in `full_name_len`
  std::int32_t full_name_len;
  char contract[kMessageBytes];  ///< the kernel's contract text (attncheck_contracts, ABI 1.1), "" when none
  std::int32_t full_contract_len;
  char contract_error[kMessageBytes];  ///< why the plugin's contracts are invalid ("" when they are not)
};

enum Op : std::uint32_t { kForward = 1, kBackward = 2, kQuit = 3 };

/// A tensor as the child rebuilds it: DLTensor fields with data at `elem0` bytes into the shared memory.
struct Tensor {
  std::uint8_t present;
  std::int32_t ndim;
  DLDataType dtype;
  DLDevice device;
  std::int64_t shape[kMaxRank];
  std::int64_t strides[kMaxRank];
  std::uint64_t elem0;         ///< byte offset of element [0,…,0] in the shared memory
  std::uint64_t lead_guard;    ///< byte offset of the PROT_NONE page before the region
  std::uint64_t trail_guard;   ///< byte offset of the PROT_NONE page after it
};

/// Argument order: q k v out lse dout dq dk dv (forward uses the first five).
struct Request {
  std::uint32_t magic;
  Op op;
  std::int32_t kernel;
  /// The caller's params by value; `args` is not a pointer here: nullptr when the caller passed none, kArgsFollow
  /// when an Args message follows this request (a call without args is the same message as before ABI 1.2).
  attncheck_params params;
  std::uint64_t shm_bytes;
  std::uint64_t memory_limit_bytes;
  std::uint64_t page;
  Tensor tensors[kMaxTensors];
};

/// Request::params.args of a request that an Args message follows.
inline const attncheck_args *args_follow() { return reinterpret_cast<const attncheck_args *>(std::uintptr_t{1}); }

/// ABI 1.2: the caller's attncheck_args, sent right after a Request whose params.args is args_follow().
struct Args {
  std::uint32_t magic;
  attncheck_args scalars;  ///< as the caller built it (size capped at ours), every tensor pointer null
  Tensor tensors[kMaxArgTensors];  ///< in kArgTensorNames order; present when the caller's pointer was not null
};

/// The tensor pointer of attncheck_args number i (kArgTensorNames order), and setting it.
inline const DLTensor *arg_tensor(const attncheck_args &a, int i) {
  switch (i) {
    case 0: return a.alibi_slopes;
    case 1: return a.sinks;
    case 2: return a.attn_mask;
    case 3: return a.cu_seqlens_q;
    case 4: return a.cu_seqlens_k;
    case 5: return a.block_table;
    case 6: return a.seqused_k;
    case 7: return a.dropout_mask;
    default: return nullptr;
  }
}
inline void set_arg_tensor(attncheck_args &a, int i, DLTensor *t) {
  switch (i) {
    case 0: a.alibi_slopes = t; break;
    case 1: a.sinks = t; break;
    case 2: a.attn_mask = t; break;
    case 3: a.cu_seqlens_q = t; break;
    case 4: a.cu_seqlens_k = t; break;
    case 5: a.block_table = t; break;
    case 6: a.seqused_k = t; break;
    case 7: a.dropout_mask = t; break;
    default: break;
  }
}

/// The caller's args as far as its `size` reaches (later fields zero), with size capped at ours: what both sides use.
inline attncheck_args read_args(const attncheck_args &caller) {
  attncheck_args a;
  std::memset(&a, 0, sizeof a);
  std::memcpy(&a, &caller, std::min<std::size_t>(caller.size, sizeof a));
  a.size = static_cast<std::uint32_t>(std::min<std::size_t>(caller.size, sizeof a));
  return a;
}

enum ReplyType : std::uint32_t { kReturned = 1, kSignalled = 2 };

/// The kernel returned (kReturned), or the child's fatal-signal handler reports before the child dies.
struct Reply {
  std::uint32_t magic;
  ReplyType type;
  std::int32_t status;       ///< kReturned: the kernel's return value
  std::int32_t signo;        ///< kSignalled
  std::int32_t enomem;       ///< errno was ENOMEM when the kernel returned or the signal came (an allocation failed)
  std::uint8_t addr_valid;   ///< kSignalled with a fault address (SIGSEGV, SIGBUS)
  std::uint8_t in_shm;       ///< the fault address lies in the shared memory; shm_offset is set
  std::uint64_t addr;
  std::uint64_t shm_offset;
  char message[kMessageBytes];  ///< kReturned: the kernel's last_error() for a non-OK status
};

}  // namespace attncheck::sandbox::wire
