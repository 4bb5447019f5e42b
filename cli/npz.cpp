// .npz archives through libzip (npz.h).
#include "npz.h"

#include <zip.h>

#include <memory>

namespace attncheck::cli {

namespace {

/// The 2-byte void type ml_dtypes.bfloat16 arrays are saved as, and the descr of bfloat16 bits it is read as: the
/// same length, so the header is rewritten in place.
constexpr std::string_view kVoid2 = "'<V2'", kBf16Bits = "'<u2'";
/// Larger entries are refused: a judged problem is a few GiB at most (SPEC.md §2.1's shapes at production sizes).
constexpr zip_uint64_t kMaxEntryBytes = zip_uint64_t{1} << 36;

struct Closer {
  void operator()(zip_t *z) const { zip_discard(z); }
  void operator()(zip_file_t *f) const { zip_fclose(f); }
};

}  // namespace

std::map<std::string, npy::Array> read_npz(const std::string &path) {
  int error = 0;
  const std::unique_ptr<zip_t, Closer> archive(zip_open(path.c_str(), ZIP_RDONLY, &error));
  if (!archive) {
    zip_error_t e;
    zip_error_init_with_code(&e, error);
    const std::string why = zip_error_strerror(&e);
    zip_error_fini(&e);
    throw npy::NpyError("cannot read " + path + " as an .npz archive (numpy.savez): " + why);
  }
  std::map<std::string, npy::Array> arrays;
  const zip_int64_t n = zip_get_num_entries(archive.get(), 0);
  for (zip_int64_t i = 0; i < n; ++i) {
    zip_stat_t st;
    if (zip_stat_index(archive.get(), static_cast<zip_uint64_t>(i), 0, &st) != 0 || !(st.valid & ZIP_STAT_NAME) ||
        !(st.valid & ZIP_STAT_SIZE))
      throw npy::NpyError(path + ": entry " + std::to_string(i) + " cannot be read: " + zip_strerror(archive.get()));
    std::string name = st.name;
    const std::string where = path + ":" + name;
    if (!name.ends_with(".npy")) throw npy::NpyError(where + " is not an .npy entry (numpy.savez writes name.npy)");
    if (st.size > kMaxEntryBytes) throw npy::NpyError(where + " is larger than 64 GiB");
    const std::unique_ptr<zip_file_t, Closer> file(zip_fopen_index(archive.get(), static_cast<zip_uint64_t>(i), 0));
    if (!file) throw npy::NpyError(where + " cannot be opened: " + zip_strerror(archive.get()));
    std::string bytes(st.size, '\0');
    for (zip_uint64_t at = 0; at < st.size;) {
      const zip_int64_t got = zip_fread(file.get(), bytes.data() + at, st.size - at);
      if (got <= 0) throw npy::NpyError(where + " is truncated: " + zip_file_strerror(file.get()));
      at += static_cast<zip_uint64_t>(got);
    }
    // The header sits in the first bytes; a two-byte void descr there is ml_dtypes' bfloat16.
    constexpr std::size_t kHeaderSearch = 256;
    if (const std::size_t at = bytes.substr(0, kHeaderSearch).find(kVoid2); at != std::string::npos)
      bytes.replace(at, kVoid2.size(), kBf16Bits);
    name.resize(name.size() - std::string_view(".npy").size());
    arrays.emplace(std::move(name), npy::parse(bytes, where));
  }
  return arrays;
}

}  // namespace attncheck::cli
