// Parent side of a call's shared memory: where each tensor goes, what it held before the call, what changed.
#pragma once

#include "attncheck/sandbox.h"
#include "wire.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace attncheck::sandbox {

/// One argument of a call as the caller passed it.
struct Arg {
  const char *name;        ///< "q", "out", …
  const DLTensor *tensor;  ///< nullptr: absent (lse may be)
  DLTensor *output;        ///< the same tensor when the kernel writes it, else nullptr
};

/// The layout of one call's shared memory: [guard][canary · tensor 0][guard] [guard][canary · tensor 1][guard] …
/// (the arguments q … dv, then under ABI 1.2 the attncheck_args tensors; an absent argument takes no room)
/// Each region ends exactly where the tensor's last element ends, so a read or write past the end faults; in
/// front of the tensor's first element lies at least one page of canary.
class Staging {
 public:
  /// Throws std::invalid_argument (a message for the caller) for a tensor the sandbox cannot carry.
  Staging(const std::vector<Arg> &args, std::size_t page);

  std::uint64_t bytes() const { return total_; }
  /// Fills every region with canary bytes and copies the caller's elements (outputs too: a kernel must not depend
  /// on what out held, and the property engine's prefill should reach it unchanged). Keeps a snapshot.
  void write(std::byte *shm);
  /// The first input changed, else the first output whose non-element bytes changed; nullopt when clean.
  std::optional<CallFault> check(const std::byte *shm) const;
  /// Copies the outputs' elements back to the caller's tensors (only elements: the caller's padding stays).
  void copy_out(const std::byte *shm) const;
  /// "12 bytes past the end of v" for an offset in a guard page, "" when it is not in one.
  std::string attribute(std::uint64_t shm_offset) const;
  /// Arguments first … first + n − 1 as the messages carry them (absent ones not present): a Request's tensors are
  /// arguments 0 … kMaxTensors − 1, an Args message's the kMaxArgTensors after them.
  void fill(wire::Tensor *dst, std::size_t first, std::size_t n) const;

 private:
  struct Region {
    Arg arg;
    std::size_t esize = 0;            // bytes per element
    std::vector<std::int64_t> shape, strides;
    std::int64_t min_off = 0, max_off = 0;  // storage offsets (elements) of the lowest and highest element
    std::uint64_t lead_guard = 0, begin = 0, end = 0;  // byte offsets: guard page, region [begin, end)
    std::uint64_t elem0 = 0;          // byte offset of element [0,…,0]
    std::vector<std::byte> snapshot;  // region bytes as written
    std::vector<std::uint8_t> is_elem;  // per element slot of the region: an element of the tensor
    bool empty = true;                // no elements
  };
  /// f(off, len, step) for each run of the tensor's last dim, in row-major order: `len` elements at storage offsets
  /// off, off + step, … (a rank-0 tensor is one run of one element).
  template <class F>
  static void for_each_run(const Region &r, F &&f);
  std::vector<Region> regions_;
  std::uint64_t total_ = 0;
  std::size_t page_;
};

}  // namespace attncheck::sandbox
