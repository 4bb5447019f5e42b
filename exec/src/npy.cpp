#include "attncheck/npy.h"

#include "attncheck/tensor.h"

#include <bit>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>

namespace attncheck::npy {

static_assert(std::endian::native == std::endian::little, ".npy data are little-endian; so is every host we build for");

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr std::size_t kMagicLen = 6;
/// numpy pads the header so that the data start at a multiple of 64 bytes (aligned loads after mmap).
constexpr std::size_t kHeaderAlign = 64;
/// A header longer than this is not one of ours (ours are < 200 bytes); refuse before allocating it.
constexpr std::uint32_t kMaxHeaderLen = 1u << 20;

int itemsize_of(std::string_view descr) {
  if (descr == "<f4" || descr == "<i4") return 4;
  if (descr == "<f2" || descr == "<u2") return 2;
  if (descr == "|u1") return 1;
  return 0;
}

/// The descr of a DLTensor's dtype, or an NpyError naming it.
std::string_view descr_for(const DLTensor &t, std::string_view what) {
  const std::string_view d = descr_of(t.dtype);
  if (d.empty())
    throw NpyError(std::string(what) + ": dtype code " + std::to_string(t.dtype.code) + " bits " +
                   std::to_string(t.dtype.bits) + " lanes " + std::to_string(t.dtype.lanes) +
                   " is not float32, float16, bfloat16, uint8 or int32");
  return d;
}

/// How a dtype is named in messages: "bf16" (dtype_name) for the storage dtypes, else "uint8" or "int32".
std::string dtype_text(DLDataType t) {
  Dtype dt;
  if (from_dlpack(t, &dt)) return std::string(dtype_name(dt));
  return t.code == kDLUInt ? "uint8" : "int32";
}

/// Calls f(element offset in elements, from data + byte_offset) for each element of t in row-major order.
template <class F>
void for_each_offset(const DLTensor &t, F &&f) {
  const int rank = t.ndim;
  std::vector<std::int64_t> shape(t.shape, t.shape + rank), strides(static_cast<std::size_t>(rank));
  std::int64_t compact = 1;
  for (int d = rank - 1; d >= 0; --d) {
    const auto ud = static_cast<std::size_t>(d);
    strides[ud] = t.strides ? t.strides[d] : compact;
    compact *= shape[ud];
  }
  for_each_storage_index(shape, strides, 0, f);
}

struct FileCloser {
  void operator()(std::FILE *f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

std::string header_for(std::string_view descr, const std::vector<std::int64_t> &shape) {
  std::string h =
      "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': " + shape_text(shape) + ", }";
  // magic + 2 version bytes + 2 length bytes + header + '\n', padded with spaces to the alignment.
  const std::size_t prefix = kMagicLen + 4;
  const std::size_t total = (prefix + h.size() + 1 + kHeaderAlign - 1) / kHeaderAlign * kHeaderAlign;
  h.append(total - prefix - h.size() - 1, ' ');
  h.push_back('\n');
  return h;
}

/// A whole .npy file: magic, version 1.0, header, data.
std::string file_bytes(std::string_view descr, const std::vector<std::int64_t> &shape, const std::byte *data,
                       std::size_t bytes) {
  const std::string header = header_for(descr, shape);
  std::string out(kMagic, kMagicLen);
  out += {'\x01', '\x00', static_cast<char>(header.size() & 0xff), static_cast<char>(header.size() >> 8)};
  out += header;
  if (bytes > 0) out.append(reinterpret_cast<const char *>(data), bytes);
  return out;
}

void write_bytes(const std::string &path, std::string_view descr, const std::vector<std::int64_t> &shape,
                 const std::byte *data, std::size_t bytes) {
  const std::string file = file_bytes(descr, shape, data, bytes);
  File f(std::fopen(path.c_str(), "wb"));
  if (!f) throw NpyError("cannot create " + path + ": " + std::strerror(errno));
  bool ok = std::fwrite(file.data(), 1, file.size(), f.get()) == file.size();
  ok = std::fflush(f.get()) == 0 && ok;
  if (!ok) throw NpyError("cannot write " + path + ": " + std::strerror(errno));
}

// ---- header dict parsing: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } ----

class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string &path) : s_(text), path_(path) {}

  void parse(Array &a) {
    bool have_descr = false, have_order = false, have_shape = false;
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') break;
      const std::string key = string_literal();
      expect(':');
      if (key == "descr") {
        a.descr = string_literal();
        have_descr = true;
      } else if (key == "fortran_order") {
        if (boolean()) fail("fortran_order is True: save C-order data (numpy.ascontiguousarray)");
        have_order = true;
      } else if (key == "shape") {
        a.shape = tuple();
        have_shape = true;
      } else {
        fail("unexpected header key '" + key + "'");
      }
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      skip_space();
      if (peek() != '}') fail("expected ',' or '}' in the header");
    }
    ++pos_;
    if (!have_descr || !have_order || !have_shape)
      fail("header lacks " + std::string(!have_descr ? "'descr'" : !have_order ? "'fortran_order'" : "'shape'"));
  }

 private:
  [[noreturn]] void fail(const std::string &why) const { throw NpyError(path_ + " is not a valid .npy: " + why); }
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) fail(std::string("expected '") + c + "' in the header");
    ++pos_;
  }
  std::string string_literal() {
    skip_space();
    const char q = peek();
    if (q != '\'' && q != '"') fail("expected a quoted string in the header");
    const std::size_t end = s_.find(q, pos_ + 1);
    if (end == std::string_view::npos) fail("unterminated string in the header");
    std::string out(s_.substr(pos_ + 1, end - pos_ - 1));
    pos_ = end + 1;
    return out;
  }
  bool boolean() {
    skip_space();
    if (s_.substr(pos_, 4) == "True") return pos_ += 4, true;
    if (s_.substr(pos_, 5) == "False") return pos_ += 5, false;
    fail("fortran_order is neither True nor False");
  }
  std::vector<std::int64_t> tuple() {
    expect('(');
    std::vector<std::int64_t> dims;
    while (true) {
      skip_space();
      if (peek() == ')') break;
      if (!std::isdigit(static_cast<unsigned char>(peek()))) fail("shape holds something other than integers");
      std::int64_t n = 0;
      while (std::isdigit(static_cast<unsigned char>(peek()))) {
        if (n > (std::int64_t{1} << 50)) fail("shape dimension too large");
        n = n * 10 + (s_[pos_++] - '0');
      }
      if (peek() == 'L') ++pos_;  // Python 2's long suffix, still seen in old files
      dims.push_back(n);
      skip_space();
      if (peek() == ',') ++pos_;
      else if (peek() != ')') fail("expected ',' or ')' in the shape");
    }
    ++pos_;
    return dims;
  }

  std::string_view s_;
  const std::string &path_;
  std::size_t pos_ = 0;
};

}  // namespace

std::string_view descr_of(Dtype dt) {
  switch (dt) {
    case Dtype::f32: return "<f4";
    case Dtype::f16: return "<f2";
    case Dtype::bf16: return "<u2";
  }
  return "?";
}

std::string_view descr_of(DLDataType t) {
  Dtype dt;
  if (from_dlpack(t, &dt)) return descr_of(dt);
  if (t.lanes != 1) return "";
  if (t.code == kDLUInt && t.bits == 8) return "|u1";
  if (t.code == kDLInt && t.bits == 32) return "<i4";
  return "";
}

std::int64_t Array::numel() const {
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}
std::string Array::shape_text() const { return npy::shape_text(shape); }

std::string shape_text(const std::vector<std::int64_t> &shape) {
  std::string s = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) s += ",";
  return s + ")";
}

void write(const std::string &path, const DLTensor &t) {
  if (t.device.device_type != kDLCPU) throw NpyError("cannot write " + path + ": the tensor is not on the CPU");
  const std::string_view descr = descr_for(t, "cannot write " + path);
  const auto size = static_cast<std::size_t>(itemsize_of(descr));
  const std::vector<std::int64_t> shape(t.shape, t.shape + t.ndim);
  std::vector<std::byte> data;
  std::int64_t n = 1;
  for (auto d : shape) n *= d;
  data.reserve(static_cast<std::size_t>(n) * size);
  const auto *base = static_cast<const std::byte *>(t.data) + t.byte_offset;
  for_each_offset(t, [&](std::int64_t off) {
    const std::byte *e = base + off * static_cast<std::int64_t>(size);
    data.insert(data.end(), e, e + size);
  });
  write_bytes(path, descr, shape, data.data(), data.size());
}

void write(const std::string &path, const Array &a) {
  write_bytes(path, a.descr, a.shape, a.data.data(), a.data.size());
}

std::string serialize(const Array &a) { return file_bytes(a.descr, a.shape, a.data.data(), a.data.size()); }

Array parse(std::string_view file, const std::string &path) {
  if (file.size() < kMagicLen + 2 || std::memcmp(file.data(), kMagic, kMagicLen) != 0)
    throw NpyError(path + " is not a .npy file (no \\x93NUMPY magic): write it with numpy.save");
  const int major = static_cast<unsigned char>(file[kMagicLen]), minor = static_cast<unsigned char>(file[kMagicLen + 1]);
  if (major < 1 || major > 3 || minor != 0)
    throw NpyError(path + " is .npy version " + std::to_string(major) + "." + std::to_string(minor) +
                   ": attncheck reads 1.0, 2.0 and 3.0");
  const std::size_t len_bytes = major == 1 ? 2 : 4, at = kMagicLen + 2;
  if (file.size() < at + len_bytes) throw NpyError(path + " is truncated inside its header");
  std::uint32_t hlen = 0;
  for (std::size_t b = 0; b < len_bytes; ++b) hlen |= std::uint32_t{static_cast<unsigned char>(file[at + b])} << (8 * b);
  if (hlen > kMaxHeaderLen) throw NpyError(path + " has an implausible header length " + std::to_string(hlen));
  if (file.size() - at - len_bytes < hlen) throw NpyError(path + " is truncated inside its header");
  const std::string_view header = file.substr(at + len_bytes, hlen);

  Array a;
  HeaderParser(header, path).parse(a);
  const std::size_t itemsize = static_cast<std::size_t>(itemsize_of(a.descr));
  if (itemsize == 0) {
    std::string why = path + " has dtype descr '" + a.descr + "'";
    if (!a.descr.empty() && a.descr[0] == '>') why += " (big-endian)";
    throw NpyError(why + ": the exec protocol takes '<f4' (float32), '<f2' (float16) or '<u2' (bfloat16 bits), "
                         "and '|u1' (uint8) or '<i4' (int32) for feature arguments");
  }
  const std::string_view data = file.substr(at + len_bytes + hlen);
  // The bytes the shape needs, without overflowing: a shape whose product exceeds what the file holds is refused.
  std::size_t want = itemsize;
  for (const std::int64_t d : a.shape) {
    if (d != 0 && want > data.size() / static_cast<std::size_t>(d)) {
      want = data.size() + 1;  // more than there is
      for (const std::int64_t z : a.shape)
        if (z == 0) want = 0;
      break;
    }
    want *= static_cast<std::size_t>(d);
  }
  if (data.size() != want)
    throw NpyError(path + " holds " + std::to_string(data.size()) + " data bytes, its shape " + a.shape_text() +
                   " and descr '" + a.descr + "' need " + (want > data.size() ? "more" : std::to_string(want)) +
                   (data.size() < want ? " (truncated: was the file still being written?)" : ""));
  a.data.resize(data.size());
  if (!data.empty()) std::memcpy(a.data.data(), data.data(), data.size());  // an empty vector's data() may be null
  return a;
}

Array read(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw NpyError("cannot open " + path + ": " + std::strerror(errno));
  const std::string file(std::istreambuf_iterator<char>(in), {});
  return parse(file, path);
}

void copy_into(const Array &a, DLTensor &t, std::string_view name) {
  const std::string_view want = descr_for(t, "cannot fill the tensor from " + std::string(name));
  if (a.descr != want)
    throw NpyError(std::string(name) + " has descr '" + a.descr + "', expected '" + std::string(want) + "' (" +
                   dtype_text(t.dtype) + ")");
  const std::vector<std::int64_t> shape(t.shape, t.shape + t.ndim);
  if (a.shape != shape)
    throw NpyError(std::string(name) + " has shape " + a.shape_text() + ", expected " + shape_text(shape));
  const auto size = static_cast<std::size_t>(itemsize_of(want));
  auto *base = static_cast<std::byte *>(t.data) + t.byte_offset;
  const std::byte *src = a.data.data();
  for_each_offset(t, [&](std::int64_t off) {
    std::memcpy(base + off * static_cast<std::int64_t>(size), src, size);
    src += size;
  });
}

}  // namespace attncheck::npy
