// The header of a NumPy .npy file (format versions 1.0, 2.0 and 3.0, as
// numpy/lib/format.py writes them), parsed only as far as tern needs: the
// magic, the version, and the header dict's 'descr', 'fortran_order' and
// 'shape'. Everything else is refused, naming the file and the field.
#include <cctype>
#include <cstring>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "worker/datasets_internal.h"

namespace tern::worker::datasets_internal {
namespace {

constexpr char kNpyMagic[] = "\x93NUMPY";
constexpr size_t kNpyMagicSize = 6;
// numpy writes headers of a few hundred bytes; anything near this is not a
// header but a damaged length field.
constexpr size_t kMaxHeaderLength = size_t{1} << 20;

// A cursor over the header dict's text, a Python literal such as
// {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }.
class DictReader {
 public:
  DictReader(absl::string_view text, const std::string& path)
      : text_(text), path_(path) {}

  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": npy header ", what, " (header: ", text_, ")"));
  }
  void SkipSpace() {
    while (pos_ < text_.size() && std::isspace(text_[pos_])) ++pos_;
  }
  // Skips spaces, then consumes `c` if it is next.
  bool Take(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool AtEnd() {
    SkipSpace();
    return pos_ == text_.size();
  }
  // A quoted string without escapes (keys and descr never have any).
  absl::StatusOr<std::string> String() {
    SkipSpace();
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) {
      return Error("expects a quoted string");
    }
    const char quote = text_[pos_++];
    const size_t end = text_.find(quote, pos_);
    if (end == absl::string_view::npos) return Error("has an open string");
    std::string s(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return s;
  }
  // True or False.
  absl::StatusOr<bool> Bool(absl::string_view field) {
    SkipSpace();
    for (const auto& [word, value] :
         {std::pair<absl::string_view, bool>{"True", true}, {"False", false}}) {
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    }
    return Error(absl::StrCat("field '", field, "' is not True or False"));
  }
  // A non-negative integer below 2^62 (a dimension).
  absl::StatusOr<int64_t> Dimension() {
    SkipSpace();
    int64_t value = 0;
    const size_t begin = pos_;
    while (pos_ < text_.size() && std::isdigit(text_[pos_])) {
      if (value > (int64_t{1} << 62) / 10) {
        return Error("field 'shape' has a dimension of 2^62 or more");
      }
      value = value * 10 + (text_[pos_++] - '0');
    }
    if (pos_ == begin) return Error("field 'shape' is not a tuple of integers");
    return value;
  }
  // A tuple of dimensions: (), (3,), (3, 4), with an optional trailing comma.
  absl::StatusOr<std::vector<int64_t>> Shape() {
    if (!Take('(')) return Error("field 'shape' is not a tuple");
    std::vector<int64_t> dims;
    while (!Take(')')) {
      if (dims.size() >= 32) return Error("field 'shape' has over 32 dims");
      TERN_ASSIGN_OR_RETURN(const int64_t d, Dimension());
      dims.push_back(d);
      if (!Take(',')) {
        if (!Take(')')) return Error("field 'shape' is not a tuple");
        break;
      }
    }
    return dims;
  }

 private:
  absl::string_view text_;
  const std::string& path_;
  size_t pos_ = 0;
};

// 'descr' to the element kind and size tern reads: little-endian (or
// byte-order-free '|') float32, int64 or uint8.
absl::Status ParseDescr(const std::string& descr, const DictReader& reader,
                        NpyHeader* header) {
  if (descr.size() >= 2 && descr[0] == '>' && descr != ">u1") {
    return reader.Error(absl::StrCat("field 'descr' is '", descr,
                                     "': big-endian data; save it as "
                                     "little-endian (numpy's default)"));
  }
  if (descr == "<f4") {
    header->dtype = torch::kFloat32;
  } else if (descr == "<i8") {
    header->dtype = torch::kInt64;
  } else if (descr == "|u1" || descr == "<u1" || descr == ">u1") {
    header->dtype = torch::kUInt8;
  } else {
    return reader.Error(absl::StrCat(
        "field 'descr' is '", descr,
        "'; tern reads float32 ('<f4'), uint8 ('|u1') or int64 ('<i8')"));
  }
  return absl::OkStatus();
}

// The dict's three fields, each exactly once, and nothing else.
absl::Status ParseDict(DictReader& reader, NpyHeader* header) {
  if (!reader.Take('{')) return reader.Error("is not a dict");
  bool have_descr = false, have_order = false, have_shape = false;
  while (!reader.Take('}')) {
    TERN_ASSIGN_OR_RETURN(const std::string key, reader.String());
    if (!reader.Take(':')) return reader.Error("has a key without a value");
    if (key == "descr" && !have_descr) {
      TERN_ASSIGN_OR_RETURN(const std::string descr, reader.String());
      TERN_RETURN_IF_ERROR(ParseDescr(descr, reader, header));
      have_descr = true;
    } else if (key == "fortran_order" && !have_order) {
      TERN_ASSIGN_OR_RETURN(const bool fortran, reader.Bool(key));
      if (fortran) {
        return reader.Error(
            "field 'fortran_order' is True; save a C-order array "
            "(np.ascontiguousarray)");
      }
      have_order = true;
    } else if (key == "shape" && !have_shape) {
      TERN_ASSIGN_OR_RETURN(header->shape, reader.Shape());
      have_shape = true;
    } else {
      return reader.Error(
          absl::StrCat("has an unexpected or repeated field '", key, "'"));
    }
    if (!reader.Take(',')) {
      if (!reader.Take('}')) return reader.Error("is not a dict");
      break;
    }
  }
  if (!reader.AtEnd()) return reader.Error("has text after the dict");
  for (const auto& [have, name] :
       {std::pair<bool, absl::string_view>{have_descr, "descr"},
        {have_order, "fortran_order"},
        {have_shape, "shape"}}) {
    if (!have) return reader.Error(absl::StrCat("lacks field '", name, "'"));
  }
  return absl::OkStatus();
}

uint32_t LittleEndian(const uint8_t* p, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

absl::StatusOr<NpyHeader> ParseNpyHeader(const uint8_t* bytes, size_t size,
                                         const std::string& path) {
  if (size < kNpyMagicSize + 4 ||
      std::memcmp(bytes, kNpyMagic, kNpyMagicSize) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a .npy file (no \\x93NUMPY magic)"));
  }
  const int major = bytes[6], minor = bytes[7];
  if (major < 1 || major > 3 || minor != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": npy format version ", major, ".", minor,
                     " is not 1.0, 2.0 or 3.0"));
  }
  const size_t length_bytes = major == 1 ? 2 : 4;
  const size_t prefix = 8 + length_bytes;
  if (size < prefix) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": truncated in the npy header length"));
  }
  const size_t length = LittleEndian(bytes + 8, static_cast<int>(length_bytes));
  if (length > kMaxHeaderLength || length > size - prefix) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": npy header length ", length,
                     " runs past the file's ", size, " bytes"));
  }
  const absl::string_view text(reinterpret_cast<const char*>(bytes + prefix),
                               length);
  DictReader reader(text, path);
  NpyHeader header;
  TERN_RETURN_IF_ERROR(ParseDict(reader, &header));
  header.data_offset = prefix + length;
  return header;
}

}  // namespace tern::worker::datasets_internal
