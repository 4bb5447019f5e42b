// The .npy reader/writer of the exec protocol: bit-exact round trips in every dtype and layout, the header numpy
// expects, files numpy writes, and clear rejections of everything the protocol does not accept.
#include "attncheck/npy.h"
#include "exec_support.h"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

using namespace attncheck;
using namespace exect;
namespace fs = std::filesystem;

namespace {

/// A fresh directory, removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string t = (fs::temp_directory_path() / "attncheck-npy-test-XXXXXX").string();
    REQUIRE(::mkdtemp(t.data()));
    path = t;
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string &name) const { return (path / name).string(); }
};

/// Storage bits of each element, in row-major order.
std::vector<std::uint32_t> element_bits(const Tensor &t) {
  std::vector<std::uint32_t> bits;
  const int size = dtype_size(t.dtype());
  for_each_index(t.shape(), [&](std::span<const std::int64_t> idx) {
    std::uint32_t b = 0;
    std::memcpy(&b, t.bytes().data() + t.index(idx) * size, static_cast<std::size_t>(size));
    bits.push_back(b);
  });
  return bits;
}

/// Values that exercise the encodings: signed zeros, infinities, subnormals, extremes.
void fill_special(std::mt19937_64 &rng, Tensor &t) {
  const double inf = std::numeric_limits<double>::infinity();
  const double specials[] = {0.0, -0.0, inf, -inf, 1e-40, -6e-8, 65504.0, 3.0e38, 1.0 / 3.0};
  std::normal_distribution<double> nd(0.0, 100.0);
  std::vector<double> v(static_cast<std::size_t>(t.numel()));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = i < std::size(specials) ? specials[i] : nd(rng);
  t.assign(v);
}

std::string read_all(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
void write_all(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

/// A valid float32 [2, 3] file with the given header text (padding and newline added).
std::string npy_with_header(std::string header, std::size_t data_bytes, char major = 1) {
  header += std::string(63 - (10 + header.size()) % 64, ' ') + "\n";
  std::string s = std::string("\x93NUMPY", 6) + major + '\0';
  s += static_cast<char>(header.size() & 0xff);
  s += static_cast<char>(header.size() >> 8);
  return s + header + std::string(data_bytes, '\0');
}

std::string read_error(const std::string &path) {
  try {
    npy::read(path);
  } catch (const npy::NpyError &e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("a tensor written as .npy reads back bit for bit into any layout, in every dtype") {
  std::mt19937_64 rng(7);
  TempDir dir;
  for (Dtype dt : {Dtype::f32, Dtype::f16, Dtype::bf16})
    for (Layout from : kLayouts)
      for (Layout to : kLayouts) {
        CAPTURE(dtype_name(dt), layout_name(from), layout_name(to));
        Tensor a = Tensor::with_layout(dt, {2, 3, 5, 4}, from, kPad);
        a.fill_storage(kNaN);
        fill_special(rng, a);
        const DLTensor da = a.dl();
        npy::write(dir.file("a.npy"), da);
        const npy::Array arr = npy::read(dir.file("a.npy"));
        CHECK(arr.descr == npy::descr_of(dt));
        CHECK(arr.shape == std::vector<std::int64_t>{2, 3, 5, 4});
        Tensor b = Tensor::with_layout(dt, {2, 3, 5, 4}, to, kPad);
        b.fill_storage(kNaN);
        DLTensor db = b.dl();
        npy::copy_into(arr, db, "a.npy");
        CHECK(element_bits(b) == element_bits(a));
        // the padding stays untouched (NaN)
        const auto mask = b.element_mask();
        for (std::int64_t i = 0; i < b.storage_elems(); ++i)
          if (!mask[static_cast<std::size_t>(i)]) REQUIRE(std::isnan(b.get_storage(i)));
      }
}

TEST_CASE("rank 0 to 3 arrays and byte_offset survive the round trip") {
  TempDir dir;
  for (std::vector<std::int64_t> shape : {std::vector<std::int64_t>{}, {7}, {3, 1}, {2, 0, 4}}) {
    Tensor t = Tensor::contiguous(Dtype::f32, shape);
    std::vector<double> v(static_cast<std::size_t>(t.numel()));
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i) + 0.5;
    t.assign(v);
    npy::write(dir.file("s.npy"), t.dl());
    const npy::Array a = npy::read(dir.file("s.npy"));
    CHECK(a.shape == shape);
    Tensor back = Tensor::contiguous(Dtype::f32, shape);
    DLTensor d = back.dl();
    npy::copy_into(a, d, "s.npy");
    CHECK(back.to_vector() == v);
  }
  Tensor off(Dtype::f16, {2, 2}, {1, 2}, 5, 9);  // transposed, 5 elements in
  off.assign(std::vector<double>{1, 2, 3, 4});
  npy::write(dir.file("o.npy"), off.dl());
  Tensor back = Tensor::contiguous(Dtype::f16, {2, 2});
  DLTensor d = back.dl();
  npy::copy_into(npy::read(dir.file("o.npy")), d, "o.npy");
  CHECK(back.to_vector() == std::vector<double>{1, 2, 3, 4});
}

TEST_CASE("the writer emits version 1.0 with a 64-byte aligned C-order little-endian header") {
  TempDir dir;
  Tensor t = Tensor::contiguous(Dtype::bf16, {1, 2, 3});
  npy::write(dir.file("h.npy"), t.dl());
  const std::string s = read_all(dir.file("h.npy"));
  REQUIRE(s.size() > 10);
  CHECK(s.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
  const std::size_t hlen = static_cast<unsigned char>(s[8]) | (static_cast<unsigned char>(s[9]) << 8);
  CHECK((10 + hlen) % 64 == 0);
  const std::string header = s.substr(10, hlen);
  CHECK(header.rfind("{'descr': '<u2', 'fortran_order': False, 'shape': (1, 2, 3), }", 0) == 0);
  CHECK(header.back() == '\n');
  CHECK(s.size() == 10 + hlen + 6 * 2);
}

#if ATTNCHECK_HAVE_NUMPY
TEST_CASE("numpy loads what attncheck writes and attncheck loads what numpy writes, versions 1.0 and 2.0") {
  std::mt19937_64 rng(3);
  TempDir dir;
  for (Dtype dt : {Dtype::f32, Dtype::f16, Dtype::bf16}) {
    CAPTURE(dtype_name(dt));
    Tensor a = Tensor::with_layout(dt, {1, 2, 3, 4}, Layout::blhd, kPad);
    fill_special(rng, a);
    npy::write(dir.file("in.npy"), a.dl());
    const std::string cmd = python_command(ATTNCHECK_NUMPY_PYTHON, ATTNCHECK_NPY_ROUNDTRIP,
                                           shell_quote(dir.file("in.npy")) + " " + shell_quote(dir.file("v1.npy")) +
                                               " " + shell_quote(dir.file("v2.npy")) + " >/dev/null");
    REQUIRE(std::system(cmd.c_str()) == 0);
    for (const char *name : {"v1.npy", "v2.npy"}) {
      CAPTURE(name);
      Tensor b = Tensor::contiguous(dt, {1, 2, 3, 4});
      DLTensor d = b.dl();
      npy::copy_into(npy::read(dir.file(name)), d, name);
      CHECK(element_bits(b) == element_bits(a));
    }
  }
}
#endif

TEST_CASE("malformed .npy files are rejected with a message naming the defect") {
  TempDir dir;
  const std::string f = dir.file("bad.npy");
  const std::size_t n = 6 * 4;
  struct Case {
    std::string bytes, expected;
  };
  const Case cases[] = {
      {"not a numpy file at all", "no \\x93NUMPY magic"},
      {npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", n, 4), "version 4.0"},
      {npy_with_header("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", n), "fortran_order is True"},
      {npy_with_header("{'descr': '>f4', 'fortran_order': False, 'shape': (2, 3), }", n), "'>f4' (big-endian)"},
      {npy_with_header("{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", n), "descr '<f8'"},
      {npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", n - 4), "(truncated"},
      {npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", n + 4), "28 data bytes"},
      {npy_with_header("{'descr': '<f4', 'fortran_order': False, }", n), "lacks 'shape'"},
      {npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }", n), "other than integers"},
      {npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'extra': 1}", n),
       "unexpected header key 'extra'"},
      {std::string("\x93NUMPY\x01\x00\x40", 9), "truncated inside its header"},
      // Found by fuzz/npy_fuzz.cpp: a shape whose element count overflows 64 bits (UB in the byte count before).
      {npy_with_header("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 1099511627776), }", n),
       "need more"},
  };
  for (const Case &c : cases) {
    CAPTURE(c.expected);
    write_all(f, c.bytes);
    const std::string msg = read_error(f);
    CHECK(msg.find(c.expected) != std::string::npos);
    CHECK(msg.find(f) != std::string::npos);  // names the file
  }
  CHECK(read_error(dir.file("absent.npy")).find("cannot open") != std::string::npos);
}

TEST_CASE("parse and serialize are read and write without a file, empty arrays included") {
  // Found by fuzz/npy_fuzz.cpp: an array without elements copied its (null) data pointer.
  for (const std::vector<std::int64_t> &shape : {std::vector<std::int64_t>{0, 4}, {3}, {}}) {
    npy::Array a{"<f4", shape, {}};
    a.data.resize(static_cast<std::size_t>(a.numel()) * 4, std::byte{0x3f});
    const npy::Array b = npy::parse(npy::serialize(a), "mem.npy");
    CHECK(b.descr == a.descr);
    CHECK(b.shape == a.shape);
    CHECK(b.data == a.data);
  }
  CHECK_THROWS_WITH(npy::parse("", "mem.npy"), Catch::Contains("mem.npy is not a .npy file"));
}

TEST_CASE("copying an array into a tensor of another dtype or shape names both") {
  TempDir dir;
  Tensor t = Tensor::contiguous(Dtype::f32, {2, 3});
  npy::write(dir.file("t.npy"), t.dl());
  const npy::Array a = npy::read(dir.file("t.npy"));
  Tensor wrong_shape = Tensor::contiguous(Dtype::f32, {3, 2});
  Tensor wrong_dtype = Tensor::contiguous(Dtype::bf16, {2, 3});
  DLTensor ds = wrong_shape.dl(), dd = wrong_dtype.dl();
  CHECK_THROWS_WITH(npy::copy_into(a, ds, "out.npy"), "out.npy has shape (2, 3), expected (3, 2)");
  CHECK_THROWS_WITH(npy::copy_into(a, dd, "out.npy"), "out.npy has descr '<f4', expected '<u2' (bf16)");
}
