// NumPy .npy files for the exec protocol (spec/EXEC_PROTOCOL.md §5): little-endian C-order arrays of float32,
// float16 and bfloat16 (stored as '<u2', the raw bits), and of uint8 and int32 (the feature arguments of ABI 1.2).
// Writes version 1.0; reads 1.0, 2.0 and 3.0.
//
// Example:
//   attncheck::npy::write("/tmp/q.npy", q_dltensor);            // any strides, byte_offset honoured
//   attncheck::npy::Array a = attncheck::npy::read("/tmp/out.npy");
//   attncheck::npy::copy_into(a, out_dltensor, "out.npy");      // checks descr and shape, scatters by strides
#pragma once

#include "attncheck/dtype.h"

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace attncheck::npy {

/// A file that cannot be written or read, or that is not a .npy this protocol accepts; what() is one line.
struct NpyError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The descr of a storage dtype: "<f4", "<f2", "<u2" (bfloat16 bits).
std::string_view descr_of(Dtype dt);
/// The descr of a DLPack dtype: the storage dtypes', and for the feature arguments (ABI 1.2) "|u1" (uint8) and "<i4"
/// (int32); "" for any other.
std::string_view descr_of(DLDataType t);

/// The contents of a .npy file.
struct Array {
  std::string descr;                ///< as written in the header, e.g. "<f4"
  std::vector<std::int64_t> shape;  ///< () for a scalar
  std::vector<std::byte> data;      ///< C-order elements, exactly numel · itemsize bytes
  std::int64_t numel() const;
  std::string shape_text() const;  ///< Python's tuple spelling: "(2, 3)", "(5,)", "()"
};

/// Writes the elements of `t` (kDLCPU; float32, float16, bfloat16, uint8 or int32; any strides in elements, NULL =
/// compact; byte_offset honoured) in row-major order as a version 1.0 .npy. Throws NpyError.
void write(const std::string &path, const DLTensor &t);
/// Writes an array as it is (tests, helpers). Throws NpyError.
void write(const std::string &path, const Array &a);

/// Reads and validates a .npy: version 1.0, 2.0 or 3.0, fortran_order False, a shape tuple and a little-endian
/// descr; the file size must match the shape exactly. Throws NpyError naming the file and the defect.
Array read(const std::string &path);

/// Parses the bytes of a .npy file as read() does; `name` (a path) appears in the NpyError message.
Array parse(std::string_view file, const std::string &name);
/// The bytes of a version 1.0 .npy file holding `a` (what write(path, a) writes); parse(serialize(a)) == a.
std::string serialize(const Array &a);

/// Checks that `a` holds `t`'s dtype (descr_of) and shape, then stores its elements into `t` with t's strides.
/// `name` (e.g. "out.npy") appears in the NpyError message.
void copy_into(const Array &a, DLTensor &t, std::string_view name);

/// Python's tuple spelling of a shape: "(2, 3)", "(5,)", "()".
std::string shape_text(const std::vector<std::int64_t> &shape);

}  // namespace attncheck::npy
