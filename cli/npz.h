// NumPy .npz archives (numpy.savez, numpy.savez_compressed): the arrays a user's test saved, read through libzip and
// the exec protocol's .npy reader (exec/include/attncheck/npy.h) — `attncheck judge --inputs case.npz`.
#pragma once

#include "attncheck/npy.h"

#include <map>
#include <string>

namespace attncheck::cli {

/// Every array of the archive at `path` by its name (the entry's name less ".npy"). float32 ('<f4'), float16 ('<f2')
/// and bfloat16 — as its uint16 bits ('<u2') or as ml_dtypes.bfloat16 saves it ('<V2', two bytes of no other type) —
/// are read. Throws npy::NpyError, one line naming the archive and the entry, for a file that is not a zip archive
/// or an entry that is not such a .npy.
std::map<std::string, npy::Array> read_npz(const std::string &path);

}  // namespace attncheck::cli
