// IDX files (LeCun's MNIST format) and the MNIST / Fashion-MNIST sets made
// of them.
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/datasets.h"
#include "worker/datasets_internal.h"

namespace tern::worker {
namespace datasets_internal {
namespace {

constexpr int64_t kMnistClasses = 10;

absl::StatusOr<std::string> FindIdx(const std::string& dir,
                                    const std::string& base,
                                    absl::string_view hint) {
  const std::string path = (std::filesystem::path(dir) / base).string();
  return FindFile({path + ".gz", path}, hint);
}

absl::StatusOr<Dataset> LoadIdxPair(const std::string& dir,
                                    const std::string& prefix,
                                    absl::string_view hint) {
  TERN_ASSIGN_OR_RETURN(const std::string images_path,
                        FindIdx(dir, prefix + "-images-idx3-ubyte", hint));
  TERN_ASSIGN_OR_RETURN(const std::string labels_path,
                        FindIdx(dir, prefix + "-labels-idx1-ubyte", hint));
  TERN_ASSIGN_OR_RETURN(const IdxArray images, ReadIdxFile(images_path));
  TERN_ASSIGN_OR_RETURN(const IdxArray labels, ReadIdxFile(labels_path));
  if (images.dims.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat(images_path,
                     ": expected 3 dimensions (N, rows, "
                     "columns), the header has ",
                     images.dims.size()));
  }
  if (labels.dims.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(labels_path, ": expected 1 dimension (N), the header has ",
                     labels.dims.size()));
  }
  const int64_t n = images.dims[0];
  if (labels.dims[0] != n) {
    return absl::InvalidArgumentError(
        absl::StrCat(labels_path, ": ", labels.dims[0], " labels for ", n,
                     " images in ", images_path));
  }
  TERN_RETURN_IF_ERROR(
      CheckLabels(labels.data.data(), n, kMnistClasses, labels_path));
  Dataset d;
  d.shape = InputShape{1, images.dims[1], images.dims[2], kMnistClasses};
  d.images =
      BytesToImages(images.data.data(), n, 1, images.dims[1], images.dims[2]);
  d.labels = torch::from_blob(const_cast<uint8_t*>(labels.data.data()), {n},
                              torch::kUInt8)
                 .to(torch::kInt64);
  return d;
}

}  // namespace

absl::StatusOr<TrainTest> LoadIdxSet(const std::string& dir,
                                     absl::string_view hint) {
  TrainTest sets;
  TERN_ASSIGN_OR_RETURN(sets.train, LoadIdxPair(dir, "train", hint));
  TERN_ASSIGN_OR_RETURN(sets.test, LoadIdxPair(dir, "t10k", hint));
  if (sets.train.shape.height != sets.test.shape.height ||
      sets.train.shape.width != sets.test.shape.width) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, ": training images are ", sets.train.shape.height,
                     "x", sets.train.shape.width, " but test images are ",
                     sets.test.shape.height, "x", sets.test.shape.width));
  }
  Normalize(&sets);
  return sets;
}

}  // namespace datasets_internal

using datasets_internal::BigEndian32;
using datasets_internal::GzHandle;
using datasets_internal::HasMoreData;
using datasets_internal::OpenForReading;
using datasets_internal::ReadBytes;

absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path) {
  TERN_ASSIGN_OR_RETURN(GzHandle file, OpenForReading(path));
  std::vector<uint8_t> header;
  TERN_ASSIGN_OR_RETURN(size_t got, ReadBytes(file.get(), path, 4, &header));
  if (got < 4) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": truncated IDX header (", got, " bytes)"));
  }
  // Magic: two zero bytes, the element type (0x08: unsigned byte), the
  // number of dimensions (LeCun et al., the MNIST database's file format).
  if (header[0] != 0 || header[1] != 0 || header[2] != 0x08 || header[3] == 0 ||
      header[3] > 4) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": bad IDX magic number 0x",
        absl::Hex(BigEndian32(header.data()), absl::kZeroPad8),
        " (expected 0x000008NN, unsigned bytes in 1 to 4 dimensions)"));
  }
  const int ndims = header[3];
  header.clear();
  TERN_ASSIGN_OR_RETURN(got, ReadBytes(file.get(), path, 4 * ndims, &header));
  if (got < static_cast<size_t>(4 * ndims)) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": truncated IDX header (", ndims, " dimensions announced)"));
  }
  // The largest array we accept: 4 GiB, far above any data set loaded here,
  // so that a corrupt header cannot overflow the size computation.
  constexpr uint64_t kMaxBytes = uint64_t{1} << 32;
  IdxArray array;
  uint64_t count = 1;
  for (int d = 0; d < ndims; ++d) {
    const uint32_t dim = BigEndian32(header.data() + 4 * d);
    if (dim == 0 || dim > kMaxBytes / count) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": bad IDX dimension ", d, " of size ", dim));
    }
    count *= dim;
    array.dims.push_back(dim);
  }
  TERN_ASSIGN_OR_RETURN(got, ReadBytes(file.get(), path, count, &array.data));
  if (got < count) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": truncated: the header announces ", count,
                     " data bytes, the file holds ", got));
  }
  TERN_ASSIGN_OR_RETURN(const bool more, HasMoreData(file.get(), path));
  if (more) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": longer than the ", count, " data bytes its header announces"));
  }
  return array;
}

}  // namespace tern::worker
