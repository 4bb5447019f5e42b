// The fork server's protocol: fixed-size messages over a SOCK_STREAM socketpair; tensors in a memfd both sides map.
#pragma once

#include <dlpack/dlpack.h>

#include "attncheck/kernel_abi.h"

#include <cstdint>

namespace attncheck::sandbox::wire {

constexpr std::uint32_t kMagic = 0x5a4e4431;  // guards against reading a misaligned stream
constexpr int kMaxRank = 8;                   // DLTensor rank the protocol carries
constexpr int kMaxTensors = 9;                // q k v out lse dout dq dk dv
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
  attncheck_params params;
  std::uint64_t shm_bytes;
  std::uint64_t memory_limit_bytes;
  std::uint64_t page;
  Tensor tensors[kMaxTensors];
};

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
