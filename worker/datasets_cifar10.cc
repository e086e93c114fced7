// The CIFAR-10 binary version (Krizhevsky 2009).
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/datasets_internal.h"

namespace tern::worker::datasets_internal {
namespace {

// CIFAR-10 binary version (Krizhevsky 2009): records of 1 label byte and
// 3072 pixel bytes (1024 red, 1024 green, 1024 blue, rows of 32).
constexpr int64_t kCifarSide = 32;
constexpr int64_t kCifarPixels = 3 * kCifarSide * kCifarSide;
constexpr int64_t kCifarRecord = 1 + kCifarPixels;
constexpr int64_t kCifarClasses = 10;
// A CIFAR-10 batch file holds 10000 records; allow a bit more, not more.
constexpr int64_t kCifarMaxRecordsPerFile = 1 << 20;

absl::Status AppendCifarFile(const std::string& path,
                             std::vector<uint8_t>* pixels,
                             std::vector<uint8_t>* labels) {
  TERN_ASSIGN_OR_RETURN(GzHandle file, OpenForReading(path));
  std::vector<uint8_t> raw;
  TERN_ASSIGN_OR_RETURN(
      const size_t got,
      ReadBytes(file.get(), path,
                static_cast<size_t>(kCifarMaxRecordsPerFile * kCifarRecord),
                &raw));
  TERN_ASSIGN_OR_RETURN(const bool more, HasMoreData(file.get(), path));
  if (more) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": larger than ", kCifarMaxRecordsPerFile, " CIFAR-10 records"));
  }
  if (got == 0 || got % kCifarRecord != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": ", got, " bytes is not a positive multiple of the ",
        kCifarRecord, "-byte CIFAR-10 record"));
  }
  const int64_t n = static_cast<int64_t>(got) / kCifarRecord;
  const size_t first = labels->size();
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* record = raw.data() + i * kCifarRecord;
    labels->push_back(record[0]);
    pixels->insert(pixels->end(), record + 1, record + kCifarRecord);
  }
  return CheckLabels(labels->data() + first, n, kCifarClasses, path);
}

absl::StatusOr<Dataset> LoadCifarFiles(const std::vector<std::string>& paths) {
  std::vector<uint8_t> pixels, labels;
  for (const std::string& path : paths) {
    TERN_RETURN_IF_ERROR(AppendCifarFile(path, &pixels, &labels));
  }
  const int64_t n = static_cast<int64_t>(labels.size());
  Dataset d;
  d.shape = InputShape{3, kCifarSide, kCifarSide, kCifarClasses};
  d.images = BytesToImages(pixels.data(), n, 3, kCifarSide, kCifarSide);
  d.labels =
      torch::from_blob(labels.data(), {n}, torch::kUInt8).to(torch::kInt64);
  return d;
}

}  // namespace

absl::StatusOr<TrainTest> LoadCifar10(const std::string& dir) {
  constexpr absl::string_view kHint =
      "point --data_dir at the CIFAR-10 binary version "
      "(cifar-10-batches-bin: data_batch_1..5.bin, test_batch.bin)";
  // The archive unpacks into cifar-10-batches-bin/; accept its parent too.
  std::filesystem::path base(dir);
  std::error_code error;
  if (!std::filesystem::exists(base / "data_batch_1.bin", error) &&
      std::filesystem::exists(
          base / "cifar-10-batches-bin" / "data_batch_1.bin", error)) {
    base /= "cifar-10-batches-bin";
  }
  std::vector<std::string> train_paths;
  for (int i = 1; i <= 5; ++i) {
    TERN_ASSIGN_OR_RETURN(
        std::string path,
        FindFile({(base / absl::StrCat("data_batch_", i, ".bin")).string()},
                 kHint));
    train_paths.push_back(std::move(path));
  }
  TERN_ASSIGN_OR_RETURN(const std::string test_path,
                        FindFile({(base / "test_batch.bin").string()}, kHint));
  TrainTest sets;
  TERN_ASSIGN_OR_RETURN(sets.train, LoadCifarFiles(train_paths));
  TERN_ASSIGN_OR_RETURN(sets.test, LoadCifarFiles({test_path}));
  Normalize(&sets);
  return sets;
}

}  // namespace tern::worker::datasets_internal
