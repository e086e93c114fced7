// --dataset=npy: train_x/train_y/test_x/test_y.npy in a directory, read
// through mmap. Float32 inputs and all targets stay in the mapping (tensors
// over it keep it alive); uint8 inputs become normalized float32 as the
// image sets do.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "worker/datasets_internal.h"

namespace tern::worker::datasets_internal {
namespace {

// Labels beyond this are a damaged file, not a classifier tern can build.
constexpr int64_t kMaxNpyClasses = int64_t{1} << 20;

// A read-only file mapped copy-on-write: tensors over it may be written
// (libtorch never promises not to) without touching the file.
class MappedFile {
 public:
  static absl::StatusOr<std::shared_ptr<MappedFile>> Open(
      const std::string& path) {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) {
        return absl::NotFoundError(absl::StrCat(
            path,
            " does not exist; point --data_dir at a directory with "
            "train_x.npy, train_y.npy, test_x.npy and test_y.npy"));
      }
      return absl::ErrnoToStatus(errno, absl::StrCat("open ", path));
    }
    struct stat info;
    if (fstat(fd, &info) != 0) {
      const int error = errno;
      close(fd);
      return absl::ErrnoToStatus(error, absl::StrCat("stat ", path));
    }
    const size_t size = static_cast<size_t>(info.st_size);
    void* data = size == 0 ? nullptr
                           : mmap(nullptr, size, PROT_READ | PROT_WRITE,
                                  MAP_PRIVATE, fd, 0);
    const int error = errno;
    close(fd);
    if (data == MAP_FAILED) {
      return absl::ErrnoToStatus(error, absl::StrCat("mmap ", path));
    }
    return std::shared_ptr<MappedFile>(new MappedFile(data, size));
  }
  ~MappedFile() {
    if (data_ != nullptr) munmap(data_, size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  uint8_t* data() const { return static_cast<uint8_t*>(data_); }
  size_t size() const { return size_; }

 private:
  MappedFile(void* data, size_t size) : data_(data), size_(size) {}
  void* data_;
  size_t size_;
};

size_t ElementSize(torch::Dtype dtype) {
  return dtype == torch::kUInt8 ? 1 : dtype == torch::kInt64 ? 8 : 4;
}

// One .npy file as a tensor over its mapping. The declared shape is checked
// against the file's size before anything is touched: a header claiming
// 2^40 elements in a 1 KB file is an error, not an allocation.
absl::StatusOr<torch::Tensor> MapNpy(const std::string& path) {
  TERN_ASSIGN_OR_RETURN(std::shared_ptr<MappedFile> file,
                        MappedFile::Open(path));
  TERN_ASSIGN_OR_RETURN(const NpyHeader header,
                        ParseNpyHeader(file->data(), file->size(), path));
  for (const int64_t d : header.shape) {
    if (d == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": field 'shape' (", absl::StrJoin(header.shape, ", "),
          ") has a zero dimension: no examples, or empty examples"));
    }
  }
  if (header.shape.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path,
        ": field 'shape' is (), a scalar; the first dimension must "
        "count the examples"));
  }
  uint64_t bytes = ElementSize(header.dtype);
  for (const int64_t d : header.shape) {
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes)) {
      bytes = ~uint64_t{0};
      break;
    }
  }
  const uint64_t present = file->size() - header.data_offset;
  if (bytes != present) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": field 'shape' (", absl::StrJoin(header.shape, ", "),
        ") needs ", bytes, " bytes of data, the file has ", present,
        bytes > present ? " (truncated)" : " (trailing bytes)"));
  }
  uint8_t* data = file->data() + header.data_offset;
  return torch::from_blob(
      data, header.shape, [file](void*) {},
      torch::TensorOptions().dtype(header.dtype));
}

std::string ShapeText(const torch::Tensor& t) {
  return absl::StrCat("(", absl::StrJoin(t.sizes(), ", "), ")");
}

// Inputs [N, ...] as [N,C,H,W] without a copy: one example dim is [1,1,D],
// two are [1,H,W], three [C,H,W]; more fold the leading ones into C.
torch::Tensor AsImages(const torch::Tensor& x) {
  const int64_t rank = x.dim() - 1;
  const int64_t w = rank >= 1 ? x.size(x.dim() - 1) : 1;
  const int64_t h = rank >= 2 ? x.size(x.dim() - 2) : 1;
  const int64_t c = x[0].numel() / std::max<int64_t>(h * w, 1);
  return x.view({x.size(0), c, h, w});
}

absl::Status CheckSameExample(const torch::Tensor& a, const std::string& pa,
                              const torch::Tensor& b, const std::string& pb) {
  if (a.scalar_type() != b.scalar_type() ||
      a.sizes().slice(1) != b.sizes().slice(1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        pa, " and ", pb,
        " disagree in field 'descr' or in field 'shape' "
        "past the first dimension: ",
        ShapeText(a), " ", c10::toString(a.scalar_type()), " against ",
        ShapeText(b), " ", c10::toString(b.scalar_type())));
  }
  return absl::OkStatus();
}

// The largest int64 label + 1 of `y`, or INVALID_ARGUMENT naming the example.
absl::StatusOr<int64_t> ClassCount(const torch::Tensor& y,
                                   const std::string& path) {
  const int64_t* labels = y.data_ptr<int64_t>();
  int64_t classes = 0;
  for (int64_t i = 0; i < y.size(0); ++i) {
    if (labels[i] < 0 || labels[i] >= kMaxNpyClasses) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": label ", labels[i], " of example ", i,
                       " is out of range [0, ", kMaxNpyClasses, ")"));
    }
    classes = std::max(classes, labels[i] + 1);
  }
  return classes;
}

// One split: x and y of one prefix, checked against each other.
absl::StatusOr<std::pair<torch::Tensor, torch::Tensor>> LoadSplit(
    const std::filesystem::path& dir, absl::string_view split) {
  const std::string px = (dir / absl::StrCat(split, "_x.npy")).string();
  const std::string py = (dir / absl::StrCat(split, "_y.npy")).string();
  TERN_ASSIGN_OR_RETURN(torch::Tensor x, MapNpy(px));
  TERN_ASSIGN_OR_RETURN(torch::Tensor y, MapNpy(py));
  if (x.scalar_type() == torch::kInt64) {
    return absl::InvalidArgumentError(absl::StrCat(
        px, ": field 'descr' is int64; inputs must be float32 or uint8"));
  }
  if (y.scalar_type() == torch::kUInt8) {
    return absl::InvalidArgumentError(absl::StrCat(
        py,
        ": field 'descr' is uint8; targets must be int64 labels or "
        "float32 values"));
  }
  if (y.scalar_type() == torch::kInt64 && y.dim() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(py, ": field 'shape' ", ShapeText(y),
                     ": int64 labels must be one per example, shape (N,)"));
  }
  if (x.size(0) != y.size(0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        px, " and ", py, " disagree in field 'shape': ", ShapeText(x), " has ",
        x.size(0), " examples, ", ShapeText(y), " has ", y.size(0)));
  }
  return std::make_pair(std::move(x), std::move(y));
}

}  // namespace

absl::StatusOr<TrainTest> LoadNpySet(const std::string& dir) {
  const std::filesystem::path base(dir);
  TERN_ASSIGN_OR_RETURN(auto train, LoadSplit(base, "train"));
  TERN_ASSIGN_OR_RETURN(auto test, LoadSplit(base, "test"));
  TERN_RETURN_IF_ERROR(
      CheckSameExample(train.first, (base / "train_x.npy").string(), test.first,
                       (base / "test_x.npy").string()));
  TERN_RETURN_IF_ERROR(
      CheckSameExample(train.second, (base / "train_y.npy").string(),
                       test.second, (base / "test_y.npy").string()));
  int64_t outputs = train.second[0].numel();  // float targets per example
  if (train.second.scalar_type() == torch::kInt64) {
    TERN_ASSIGN_OR_RETURN(
        const int64_t train_classes,
        ClassCount(train.second, (base / "train_y.npy").string()));
    TERN_ASSIGN_OR_RETURN(
        const int64_t test_classes,
        ClassCount(test.second, (base / "test_y.npy").string()));
    outputs = std::max(train_classes, test_classes);
  }
  TrainTest sets;
  const torch::Tensor images = AsImages(train.first);
  sets.train = Dataset{
      images, train.second,
      InputShape{images.size(1), images.size(2), images.size(3), outputs}};
  // A TorchScript model sees the files' own example shape.
  const auto example = train.first.sizes().slice(1);
  sets.train.shape.example_shape.assign(example.begin(), example.end());
  sets.test = Dataset{AsImages(test.first), test.second, sets.train.shape};
  if (images.scalar_type() == torch::kUInt8) {
    for (Dataset* d : {&sets.train, &sets.test}) {
      d->images = d->images.to(torch::kFloat32).div_(255.0f);
    }
    Normalize(&sets);
  }
  return sets;
}

}  // namespace tern::worker::datasets_internal
