#include "worker/datasets.h"

#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "ATen/Parallel.h"
#include "common/test_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "torch/types.h"

namespace tern::worker {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// --- writing test files ---------------------------------------------------

void WritePlain(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  ASSERT_TRUE(out.good()) << path;
}

void WriteGz(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile file = gzopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr) << path;
  if (!bytes.empty()) {
    ASSERT_EQ(gzwrite(file, bytes.data(), bytes.size()),
              static_cast<int>(bytes.size()));
  }
  ASSERT_EQ(gzclose(file), Z_OK);
}

// An IDX file of unsigned bytes: magic 0x00000800 | ndims, big-endian dims.
std::vector<uint8_t> Idx(const std::vector<uint32_t>& dims,
                         const std::vector<uint8_t>& data) {
  std::vector<uint8_t> bytes = {0, 0, 0x08, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) {
      bytes.push_back(static_cast<uint8_t>(d >> shift));
    }
  }
  bytes.insert(bytes.end(), data.begin(), data.end());
  return bytes;
}

// A small MNIST-like set: `n` images of rows x cols with pixel
// (i, r, c) = (7*i + 3*r + c) mod 256 and label i mod 10.
struct SmallIdx {
  int64_t n, rows, cols;
  std::vector<uint8_t> pixels, labels;
};

SmallIdx MakeSmallIdx(int64_t n, int64_t rows, int64_t cols, int salt) {
  SmallIdx s{n, rows, cols, {}, {}};
  for (int64_t i = 0; i < n; ++i) {
    s.labels.push_back(static_cast<uint8_t>((i + salt) % 10));
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < cols; ++c) {
        s.pixels.push_back(
            static_cast<uint8_t>((7 * i + 3 * r + c + salt) % 256));
      }
    }
  }
  return s;
}

void WriteIdxSet(const std::string& dir, const std::string& prefix,
                 const SmallIdx& s, bool gz) {
  const auto write = gz ? WriteGz : WritePlain;
  const std::string suffix = gz ? ".gz" : "";
  write(dir + "/" + prefix + "-images-idx3-ubyte" + suffix,
        Idx({static_cast<uint32_t>(s.n), static_cast<uint32_t>(s.rows),
             static_cast<uint32_t>(s.cols)},
            s.pixels));
  write(dir + "/" + prefix + "-labels-idx1-ubyte" + suffix,
        Idx({static_cast<uint32_t>(s.n)}, s.labels));
}

std::vector<float> ToFloats(const torch::Tensor& t) {
  const torch::Tensor c = t.contiguous().to(torch::kFloat32);
  return std::vector<float>(c.data_ptr<float>(),
                            c.data_ptr<float>() + c.numel());
}

// --- IDX -------------------------------------------------------------------

class IdxLoadTest : public ::testing::TestWithParam<bool> {};

TEST_P(IdxLoadTest, LoadsAndNormalizesWithTrainingStatistics) {
  const bool gz = GetParam();
  const std::string dir = FreshTestDir();
  const SmallIdx train = MakeSmallIdx(12, 5, 4, 0);
  const SmallIdx test = MakeSmallIdx(3, 5, 4, 1);
  WriteIdxSet(dir, "train", train, gz);
  WriteIdxSet(dir, "t10k", test, gz);

  auto sets = LoadDataset("mnist", dir, 0);
  ASSERT_TRUE(sets.ok()) << sets.status();
  EXPECT_EQ(sets->train.images.sizes().vec(),
            (std::vector<int64_t>{12, 1, 5, 4}));
  EXPECT_EQ(sets->test.images.sizes().vec(),
            (std::vector<int64_t>{3, 1, 5, 4}));
  EXPECT_EQ(sets->train.images.scalar_type(), torch::kFloat32);
  EXPECT_EQ(sets->train.labels.scalar_type(), torch::kInt64);
  EXPECT_EQ(sets->train.shape.channels, 1);
  EXPECT_EQ(sets->train.shape.height, 5);
  EXPECT_EQ(sets->train.shape.width, 4);
  EXPECT_EQ(sets->train.shape.num_classes, 10);
  for (int64_t i = 0; i < 12; ++i) {
    EXPECT_EQ(sets->train.labels[i].item<int64_t>(), train.labels[i]);
  }

  // The expected transform: x/255, minus the training mean, over the
  // training standard deviation (population), both for train and test.
  double sum = 0, sum_sq = 0;
  for (uint8_t p : train.pixels) {
    sum += p / 255.0;
    sum_sq += (p / 255.0) * (p / 255.0);
  }
  const double mean = sum / train.pixels.size();
  const double stddev = std::sqrt(sum_sq / train.pixels.size() - mean * mean);
  const std::vector<float> got_train = ToFloats(sets->train.images);
  const std::vector<float> got_test = ToFloats(sets->test.images);
  for (size_t k = 0; k < train.pixels.size(); ++k) {
    ASSERT_NEAR(got_train[k], (train.pixels[k] / 255.0 - mean) / stddev, 1e-4)
        << k;
  }
  for (size_t k = 0; k < test.pixels.size(); ++k) {
    ASSERT_NEAR(got_test[k], (test.pixels[k] / 255.0 - mean) / stddev, 1e-4)
        << k;
  }
  EXPECT_NEAR(sets->train.images.mean().item<double>(), 0.0, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(GzAndPlain, IdxLoadTest, ::testing::Bool(),
                         [](const auto& info) {
                           return info.param ? "Gz" : "Plain";
                         });

TEST(IdxTest, ReadsDimensionsAndData) {
  const std::string path = FreshTestDir() + "/a.idx";
  WritePlain(path, Idx({2, 3}, {1, 2, 3, 4, 5, 6}));
  auto array = ReadIdxFile(path);
  ASSERT_TRUE(array.ok()) << array.status();
  EXPECT_EQ(array->dims, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(array->data, (std::vector<uint8_t>{1, 2, 3, 4, 5, 6}));
}

// Every corruption is INVALID_ARGUMENT naming the file, gzip or not.
class CorruptIdxTest
    : public ::testing::TestWithParam<std::tuple<std::string, bool>> {};

TEST_P(CorruptIdxTest, IsRejected) {
  const auto& [kind, gz] = GetParam();
  std::vector<uint8_t> bytes = Idx({3, 2, 2}, std::vector<uint8_t>(12, 9));
  std::string expect;
  if (kind == "magic_type") {
    bytes[2] = 0x0D;  // float32 elements: not what a data set holds
    expect = "magic";
  } else if (kind == "magic_zero") {
    bytes[0] = 1;
    expect = "magic";
  } else if (kind == "no_dims") {
    bytes[3] = 0;
    expect = "magic";
  } else if (kind == "short_magic") {
    bytes.resize(3);
    expect = "truncated";
  } else if (kind == "short_dims") {
    bytes.resize(4 + 6);
    expect = "truncated";
  } else if (kind == "short_data") {
    bytes.pop_back();
    expect = "truncated";
  } else if (kind == "long_data") {
    bytes.push_back(0);
    expect = "longer";
  } else if (kind == "zero_dim") {
    bytes[4 + 4 + 3] = 0;  // rows = 0
    expect = "dimension";
  } else if (kind == "huge_dims") {
    // 2^31 x 2^31 x 2^31 bytes announced by a 28-byte file.
    for (int d = 0; d < 3; ++d) {
      bytes[4 + 4 * d] = 0x80;
      bytes[5 + 4 * d] = bytes[6 + 4 * d] = bytes[7 + 4 * d] = 0;
    }
    expect = "dimension";
  } else if (kind == "empty") {
    bytes.clear();
    expect = "truncated";
  }
  const std::string path =
      FreshTestDir() + "/bad-idx3-ubyte" + (gz ? ".gz" : "");
  (gz ? WriteGz : WritePlain)(path, bytes);
  auto array = ReadIdxFile(path);
  ASSERT_FALSE(array.ok());
  EXPECT_EQ(array.status().code(), absl::StatusCode::kInvalidArgument)
      << array.status();
  EXPECT_THAT(std::string(array.status().message()), HasSubstr(path));
  EXPECT_THAT(std::string(array.status().message()), HasSubstr(expect));
}

INSTANTIATE_TEST_SUITE_P(
    AllKinds, CorruptIdxTest,
    ::testing::Combine(::testing::Values("magic_type", "magic_zero", "no_dims",
                                         "short_magic", "short_dims",
                                         "short_data", "long_data", "zero_dim",
                                         "huge_dims", "empty"),
                       ::testing::Bool()),
    [](const auto& info) {
      return std::get<0>(info.param) +
             (std::get<1>(info.param) ? "_Gz" : "_Plain");
    });

TEST(IdxTest, DamagedGzipStreamIsInvalidArgument) {
  const std::string dir = FreshTestDir();
  // Varied data so that the deflate stream is long enough to damage.
  std::vector<uint8_t> data(4000);
  for (size_t i = 0; i < data.size(); ++i) data[i] = (i * 7919) % 251;
  WriteGz(dir + "/good.gz", Idx({4000}, data));
  std::ifstream in(dir + "/good.gz", std::ios::binary);
  std::vector<uint8_t> gz((std::istreambuf_iterator<char>(in)),
                          std::istreambuf_iterator<char>());
  ASSERT_GT(gz.size(), 100u);
  // A cut-off gzip member: the data stops before the header's count.
  std::vector<uint8_t> cut(gz.begin(), gz.begin() + gz.size() / 2);
  WritePlain(dir + "/cut.gz", cut);
  // Flipped bits inside the deflate stream: bad data or a bad CRC.
  for (size_t k = 20; k < 40; ++k) gz[k] ^= 0x5A;
  WritePlain(dir + "/flipped.gz", gz);
  for (const std::string name : {"cut.gz", "flipped.gz"}) {
    auto array = ReadIdxFile(dir + "/" + name);
    ASSERT_FALSE(array.ok()) << name;
    EXPECT_EQ(array.status().code(), absl::StatusCode::kInvalidArgument)
        << array.status();
    EXPECT_THAT(std::string(array.status().message()), HasSubstr(name));
  }
}

TEST(IdxTest, MissingFileIsNotFound) {
  auto array = ReadIdxFile(FreshTestDir() + "/nothing-here");
  ASSERT_FALSE(array.ok());
  EXPECT_EQ(array.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(array.status().message()), HasSubstr("nothing-here"));
}

TEST(IdxTest, GzipIsPreferredOverThePlainFile) {
  const std::string dir = FreshTestDir();
  WriteIdxSet(dir, "train", MakeSmallIdx(4, 2, 2, 0), /*gz=*/true);
  WriteIdxSet(dir, "t10k", MakeSmallIdx(2, 2, 2, 0), /*gz=*/true);
  // A plain file of another size beside the .gz is ignored.
  WriteIdxSet(dir, "train", MakeSmallIdx(6, 2, 2, 0), /*gz=*/false);
  auto sets = LoadDataset("mnist", dir, 0);
  ASSERT_TRUE(sets.ok()) << sets.status();
  EXPECT_EQ(sets->train.images.size(0), 4);
}

TEST(IdxTest, LabelOutOfRangeNamesTheLabelsFile) {
  const std::string dir = FreshTestDir();
  SmallIdx train = MakeSmallIdx(4, 2, 2, 0);
  train.labels[2] = 10;
  WriteIdxSet(dir, "train", train, false);
  WriteIdxSet(dir, "t10k", MakeSmallIdx(2, 2, 2, 0), false);
  auto sets = LoadDataset("mnist", dir, 0);
  ASSERT_FALSE(sets.ok());
  EXPECT_EQ(sets.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(sets.status().message()),
              HasSubstr("train-labels-idx1-ubyte"));
  EXPECT_THAT(std::string(sets.status().message()), HasSubstr("label 10"));
}

TEST(IdxTest, MismatchedCountsAndRanksAreInvalid) {
  {
    const std::string dir = FreshTestDir() + "_counts";
    fs::create_directories(dir);
    WriteIdxSet(dir, "train", MakeSmallIdx(4, 2, 2, 0), false);
    WriteIdxSet(dir, "t10k", MakeSmallIdx(2, 2, 2, 0), false);
    WritePlain(dir + "/train-labels-idx1-ubyte", Idx({3}, {1, 2, 3}));
    auto sets = LoadDataset("mnist", dir, 0);
    ASSERT_FALSE(sets.ok());
    EXPECT_EQ(sets.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(sets.status().message()), HasSubstr("3 labels"));
  }
  {
    const std::string dir = FreshTestDir() + "_rank";
    fs::create_directories(dir);
    WriteIdxSet(dir, "train", MakeSmallIdx(4, 2, 2, 0), false);
    WriteIdxSet(dir, "t10k", MakeSmallIdx(2, 2, 2, 0), false);
    WritePlain(dir + "/t10k-images-idx3-ubyte",
               Idx({2, 4}, {0, 0, 0, 0, 0, 0, 0, 0}));
    auto sets = LoadDataset("mnist", dir, 0);
    ASSERT_FALSE(sets.ok());
    EXPECT_EQ(sets.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(sets.status().message()),
                HasSubstr("t10k-images-idx3-ubyte"));
  }
}

// --- missing files and bad names -------------------------------------------

TEST(LoadDatasetTest, MissingFilesNameTheFileAndTheRemedy) {
  const std::string dir = FreshTestDir();
  auto fashion = LoadDataset("fashion-mnist", dir, 0);
  ASSERT_FALSE(fashion.ok());
  EXPECT_EQ(fashion.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(fashion.status().message()),
              HasSubstr(dir + "/train-images-idx3-ubyte.gz"));
  EXPECT_THAT(std::string(fashion.status().message()),
              HasSubstr("dataset-fashion-mnist"));
  EXPECT_THAT(std::string(fashion.status().message()), HasSubstr("--data_dir"));

  // Only the test labels are missing.
  WriteIdxSet(dir, "train", MakeSmallIdx(4, 2, 2, 0), false);
  WriteIdxSet(dir, "t10k", MakeSmallIdx(2, 2, 2, 0), false);
  fs::remove(dir + "/t10k-labels-idx1-ubyte");
  auto mnist = LoadDataset("mnist", dir, 0);
  ASSERT_FALSE(mnist.ok());
  EXPECT_EQ(mnist.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(mnist.status().message()),
              HasSubstr("t10k-labels-idx1-ubyte"));
  EXPECT_THAT(std::string(mnist.status().message()), HasSubstr("--data_dir"));

  auto cifar = LoadDataset("cifar10", dir, 0);
  ASSERT_FALSE(cifar.ok());
  EXPECT_EQ(cifar.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(cifar.status().message()),
              HasSubstr("data_batch_1.bin"));
}

TEST(LoadDatasetTest, NamesAndRequiredDirectories) {
  for (const std::string name : {"mnist", "cifar10", "npy"}) {
    auto sets = LoadDataset(name, "", 0);
    ASSERT_FALSE(sets.ok()) << name;
    EXPECT_EQ(sets.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(sets.status().message()), HasSubstr("--data_dir"));
  }
  auto unknown = LoadDataset("imagenet", "/tmp", 0);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(unknown.status().message()),
              HasSubstr("fashion-mnist, mnist, cifar10, synthetic, npy"));
  EXPECT_EQ(DatasetNames(),
            (std::vector<std::string>{"fashion-mnist", "mnist", "cifar10",
                                      "synthetic", "npy"}));
}

// --- CIFAR-10 --------------------------------------------------------------

// `n` records; record i has label (i + salt) % 10 and channel c's pixels
// all equal to 10 * c + i.
std::vector<uint8_t> CifarRecords(int n, int salt) {
  std::vector<uint8_t> bytes;
  for (int i = 0; i < n; ++i) {
    bytes.push_back(static_cast<uint8_t>((i + salt) % 10));
    for (int c = 0; c < 3; ++c) {
      bytes.insert(bytes.end(), 1024, static_cast<uint8_t>(10 * c + i));
    }
  }
  return bytes;
}

void WriteCifar(const std::string& dir) {
  fs::create_directories(dir);
  for (int b = 1; b <= 5; ++b) {
    WritePlain(dir + "/data_batch_" + std::to_string(b) + ".bin",
               CifarRecords(2, b));
  }
  WritePlain(dir + "/test_batch.bin", CifarRecords(3, 0));
}

TEST(CifarTest, LoadsChannelsInOrder) {
  for (const bool nested : {false, true}) {
    SCOPED_TRACE(nested);
    const std::string dir = FreshTestDir() + (nested ? "_nested" : "_flat");
    WriteCifar(nested ? dir + "/cifar-10-batches-bin" : dir);
    auto sets = LoadDataset("cifar10", dir, 0);
    ASSERT_TRUE(sets.ok()) << sets.status();
    EXPECT_EQ(sets->train.images.sizes().vec(),
              (std::vector<int64_t>{10, 3, 32, 32}));
    EXPECT_EQ(sets->test.images.sizes().vec(),
              (std::vector<int64_t>{3, 3, 32, 32}));
    EXPECT_EQ(sets->train.shape.channels, 3);
    EXPECT_EQ(sets->train.shape.num_classes, 10);
    // Files in order 1..5, records in file order: record 2 is file 2's
    // first, label (0 + 2) % 10.
    EXPECT_EQ(sets->train.labels[2].item<int64_t>(), 2);
    EXPECT_EQ(sets->train.labels[3].item<int64_t>(), 3);
    // Per-channel normalization: training pixels of channel c are
    // 10c + {0, 1} in equal numbers, so they map to -1 and +1 exactly.
    const torch::Tensor train = sets->train.images;
    for (int c = 0; c < 3; ++c) {
      EXPECT_NEAR(train[0][c][5][7].item<float>(), -1.0, 1e-4);
      EXPECT_NEAR(train[1][c][31][0].item<float>(), 1.0, 1e-4);
    }
    // Test record 2 of channel c is 10c + 2: mean 10c + 0.5, std 0.5.
    EXPECT_NEAR(sets->test.images[2][1][0][0].item<float>(), 3.0, 1e-3);
  }
}

TEST(CifarTest, BadFilesAreRejected) {
  {
    const std::string dir = FreshTestDir() + "_size";
    WriteCifar(dir);
    std::vector<uint8_t> bytes = CifarRecords(2, 0);
    bytes.pop_back();
    WritePlain(dir + "/data_batch_3.bin", bytes);
    auto sets = LoadDataset("cifar10", dir, 0);
    ASSERT_FALSE(sets.ok());
    EXPECT_EQ(sets.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(sets.status().message()),
                HasSubstr("data_batch_3.bin"));
  }
  {
    const std::string dir = FreshTestDir() + "_label";
    WriteCifar(dir);
    std::vector<uint8_t> bytes = CifarRecords(3, 0);
    bytes[3073] = 10;  // the second record's label
    WritePlain(dir + "/test_batch.bin", bytes);
    auto sets = LoadDataset("cifar10", dir, 0);
    ASSERT_FALSE(sets.ok());
    EXPECT_EQ(sets.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(sets.status().message()),
                HasSubstr("test_batch.bin"));
  }
  {
    const std::string dir = FreshTestDir() + "_empty";
    WriteCifar(dir);
    WritePlain(dir + "/data_batch_5.bin", {});
    auto sets = LoadDataset("cifar10", dir, 0);
    ASSERT_FALSE(sets.ok());
    EXPECT_EQ(sets.status().code(), absl::StatusCode::kInvalidArgument);
  }
  {
    const std::string dir = FreshTestDir() + "_missing";
    WriteCifar(dir);
    fs::remove(dir + "/test_batch.bin");
    auto sets = LoadDataset("cifar10", dir, 0);
    ASSERT_FALSE(sets.ok());
    EXPECT_EQ(sets.status().code(), absl::StatusCode::kNotFound);
    EXPECT_THAT(std::string(sets.status().message()),
                HasSubstr("test_batch.bin"));
  }
}

// --- real Fashion-MNIST ----------------------------------------------------

TEST(FashionMnistTest, LoadsTheInstalledDataSet) {
  const std::string dir(kDefaultFashionMnistDir);
  if (!fs::exists(dir + "/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  }
  auto sets = LoadDataset("fashion-mnist", "", 0);
  ASSERT_TRUE(sets.ok()) << sets.status();
  EXPECT_EQ(sets->train.images.sizes().vec(),
            (std::vector<int64_t>{60000, 1, 28, 28}));
  EXPECT_EQ(sets->test.images.sizes().vec(),
            (std::vector<int64_t>{10000, 1, 28, 28}));
  EXPECT_EQ(sets->train.labels.size(0), 60000);
  EXPECT_EQ(sets->test.labels.size(0), 10000);
  // Fashion-MNIST is balanced: 6000 training and 1000 test images a class.
  const torch::Tensor train_counts = torch::bincount(sets->train.labels);
  const torch::Tensor test_counts = torch::bincount(sets->test.labels);
  ASSERT_EQ(train_counts.size(0), 10);
  ASSERT_EQ(test_counts.size(0), 10);
  for (int c = 0; c < 10; ++c) {
    EXPECT_EQ(train_counts[c].item<int64_t>(), 6000);
    EXPECT_EQ(test_counts[c].item<int64_t>(), 1000);
  }
  // The training statistics are the published ones (mean 0.2860, std
  // 0.3530 of x/255): a raw pixel x maps to (x/255 - 0.2860) / 0.3530.
  auto raw = ReadIdxFile(dir + "/train-images-idx3-ubyte.gz");
  ASSERT_TRUE(raw.ok()) << raw.status();
  const std::vector<float> got = ToFloats(sets->train.images);
  ASSERT_EQ(got.size(), raw->data.size());
  for (size_t k = 0; k < got.size(); k += 997) {
    ASSERT_NEAR(got[k], (raw->data[k] / 255.0 - 0.2860) / 0.3530, 2e-3) << k;
  }
  EXPECT_NEAR(sets->train.images.mean().item<double>(), 0.0, 1e-3);
  EXPECT_NEAR(sets->train.images.std().item<double>(), 1.0, 1e-3);
}

// --- synthetic ---------------------------------------------------------------

TEST(SyntheticTest, IsSmallBalancedAndAFunctionOfTheSeed) {
  auto a = LoadDataset("synthetic", "", 11);
  auto b = LoadDataset("synthetic", "/ignored", 11);
  auto c = LoadDataset("synthetic", "", 12);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->train.images.sizes().vec(),
            (std::vector<int64_t>{6000, 1, 28, 28}));
  EXPECT_EQ(a->test.images.sizes().vec(),
            (std::vector<int64_t>{1000, 1, 28, 28}));
  EXPECT_EQ(a->train.labels.scalar_type(), torch::kInt64);
  EXPECT_EQ(a->train.shape.num_classes, 10);
  EXPECT_TRUE(torch::equal(a->train.images, b->train.images));
  EXPECT_TRUE(torch::equal(a->train.labels, b->train.labels));
  EXPECT_TRUE(torch::equal(a->test.images, b->test.images));
  EXPECT_FALSE(torch::equal(a->train.images, c->train.images));
  EXPECT_FALSE(torch::equal(a->train.labels, c->train.labels));
  // Train and test are different examples.
  EXPECT_FALSE(torch::equal(a->train.images.slice(0, 0, 1000), a->test.images));
  // Every class is present in a reasonable share.
  const torch::Tensor counts =
      torch::bincount(a->train.labels, /*weights=*/{}, /*minlength=*/10);
  ASSERT_EQ(counts.size(0), 10);
  for (int k = 0; k < 10; ++k) {
    EXPECT_GT(counts[k].item<int64_t>(), 100) << "class " << k;
  }
  EXPECT_GE(a->train.labels.min().item<int64_t>(), 0);
  EXPECT_LT(a->train.labels.max().item<int64_t>(), 10);
  EXPECT_NEAR(a->train.images.mean().item<double>(), 0.0, 1e-4);
  EXPECT_NEAR(a->train.images.std().item<double>(), 1.0, 1e-3);
}

// The classes are (nearly) linearly separable in the pixels: least squares
// on the training images predicts test labels almost always (chance: 10%).
TEST(SyntheticTest, IsLearnableByALinearReadout) {
  auto sets = LoadDataset("synthetic", "", 3);
  ASSERT_TRUE(sets.ok());
  const torch::Tensor x = sets->train.images.flatten(1).to(torch::kDouble);
  const torch::Tensor y =
      torch::one_hot(sets->train.labels, 10).to(torch::kDouble);
  const torch::Tensor ridge =
      x.t().matmul(x) + 1.0 * torch::eye(x.size(1), torch::kDouble);
  const torch::Tensor w = torch::linalg_solve(ridge, x.t().matmul(y));
  const torch::Tensor predicted =
      sets->test.images.flatten(1).to(torch::kDouble).matmul(w).argmax(1);
  const double accuracy =
      predicted.eq(sets->test.labels).to(torch::kDouble).mean().item<double>();
  EXPECT_GT(accuracy, 0.95);
}

// --- ShardedBatches ----------------------------------------------------------

// n examples whose image and label are both the example's index.
Dataset IndexedDataset(int64_t n) {
  Dataset d;
  d.images = torch::arange(n, torch::kFloat32).view({n, 1, 1, 1});
  d.labels = torch::arange(n, torch::kInt64);
  d.shape = InputShape{1, 1, 1, 10};
  return d;
}

// (examples, workers, batch size)
class ShardTest
    : public ::testing::TestWithParam<std::tuple<int64_t, uint32_t, uint32_t>> {
};

TEST_P(ShardTest, WorkersAreDisjointAndCoverTheEpoch) {
  const auto [n, workers, batch] = GetParam();
  const Dataset data = IndexedDataset(n);
  std::vector<ShardedBatches> shards;
  for (uint32_t w = 0; w < workers; ++w) {
    auto s = ShardedBatches::Create(data, w, workers, batch, /*seed=*/9);
    ASSERT_TRUE(s.ok()) << s.status();
    shards.push_back(*std::move(s));
  }
  const uint64_t per_epoch = n / (int64_t{workers} * batch);
  std::vector<int64_t> previous_epoch;
  for (uint64_t epoch = 0; epoch < 3; ++epoch) {
    std::set<int64_t> seen;
    std::vector<int64_t> order;
    for (uint64_t b = 0; b < per_epoch; ++b) {
      for (uint32_t w = 0; w < workers; ++w) {
        ASSERT_EQ(shards[w].batches_per_epoch(), per_epoch);
        ASSERT_EQ(shards[w].epoch(), epoch);
        auto [images, labels] = shards[w].Next();
        ASSERT_EQ(images.sizes().vec(), (std::vector<int64_t>{batch, 1, 1, 1}));
        ASSERT_EQ(labels.sizes().vec(), (std::vector<int64_t>{batch}));
        // Images and labels travel together.
        ASSERT_TRUE(
            torch::equal(images.view({batch}).to(torch::kInt64), labels));
        for (int64_t j = 0; j < batch; ++j) {
          const int64_t index = labels[j].item<int64_t>();
          ASSERT_GE(index, 0);
          ASSERT_LT(index, n);
          EXPECT_TRUE(seen.insert(index).second)
              << "example " << index << " twice in epoch " << epoch;
          order.push_back(index);
        }
      }
    }
    EXPECT_EQ(seen.size(), per_epoch * workers * batch);
    if (n % (int64_t{workers} * batch) == 0) {
      EXPECT_EQ(seen.size(), static_cast<size_t>(n));
    }
    // A new permutation each epoch.
    if (epoch > 0 && order.size() > 5) {
      EXPECT_NE(order, previous_epoch);
    }
    previous_epoch = order;
  }
  for (const auto& s : shards) EXPECT_EQ(s.epoch(), 3u);
}

INSTANTIATE_TEST_SUITE_P(
    SizesAndCounts, ShardTest,
    ::testing::Values(std::make_tuple(int64_t{100}, 1u, 10u),
                      std::make_tuple(int64_t{100}, 3u, 7u),
                      std::make_tuple(int64_t{17}, 4u, 2u),
                      std::make_tuple(int64_t{64}, 8u, 8u),
                      std::make_tuple(int64_t{5}, 5u, 1u),
                      std::make_tuple(int64_t{1}, 1u, 1u),
                      std::make_tuple(int64_t{1001}, 2u, 32u)));

std::vector<int64_t> Stream(ShardedBatches& s, int batches) {
  std::vector<int64_t> out;
  for (int b = 0; b < batches; ++b) {
    const torch::Tensor labels = s.Next().second;
    out.insert(out.end(), labels.data_ptr<int64_t>(),
               labels.data_ptr<int64_t>() + labels.numel());
  }
  return out;
}

TEST(ShardedBatchesTest, DeterministicAcrossConstructionsAndThreads) {
  const Dataset data = IndexedDataset(300);
  at::set_num_threads(1);
  ShardedBatches a(data, 1, 3, 8, 42);
  const std::vector<int64_t> first = Stream(a, 30);
  at::set_num_threads(2);
  ShardedBatches b(data, 1, 3, 8, 42);
  EXPECT_EQ(Stream(b, 30), first);
  ShardedBatches other_seed(data, 1, 3, 8, 43);
  EXPECT_NE(Stream(other_seed, 30), first);
  ShardedBatches other_worker(data, 2, 3, 8, 42);
  EXPECT_NE(Stream(other_worker, 30), first);
  at::set_num_threads(1);
}

TEST(ShardedBatchesTest, SeekResumesTheStream) {
  const Dataset data = IndexedDataset(50);
  ShardedBatches a(data, 0, 2, 4, 5);  // 6 batches an epoch
  const std::vector<int64_t> all = Stream(a, 20);
  EXPECT_EQ(a.position(), 20u);
  ShardedBatches b(data, 0, 2, 4, 5);
  b.Seek(13);
  EXPECT_EQ(b.epoch(), 2u);
  EXPECT_EQ(Stream(b, 7),
            std::vector<int64_t>(all.begin() + 13 * 4, all.end()));
  b.Seek(0);
  EXPECT_EQ(Stream(b, 3), std::vector<int64_t>(all.begin(), all.begin() + 12));
}

// Fisher-Yates draws uniformly: over many epochs, every example comes first
// about equally often.
TEST(ShardedBatchesTest, ShuffleIsUniform) {
  const Dataset data = IndexedDataset(10);
  ShardedBatches s(data, 0, 1, 10, 77);
  std::vector<int> first(10, 0), last(10, 0);
  constexpr int kEpochs = 4000;
  for (int e = 0; e < kEpochs; ++e) {
    const torch::Tensor labels = s.Next().second;
    ++first[labels[0].item<int64_t>()];
    ++last[labels[9].item<int64_t>()];
  }
  // Binomial(4000, 0.1): mean 400, standard deviation 19.
  for (int k = 0; k < 10; ++k) {
    EXPECT_NEAR(first[k], 400, 100) << k;
    EXPECT_NEAR(last[k], 400, 100) << k;
  }
}

TEST(ShardedBatchesTest, BadArgumentsAreInvalid) {
  const Dataset data = IndexedDataset(20);
  const std::vector<std::tuple<uint32_t, uint32_t, uint32_t>> bad = {
      {0, 0, 4},   // no workers
      {3, 3, 4},   // worker out of range
      {0, 2, 0},   // empty batches
      {0, 3, 7}};  // 21 examples a step, 20 in the set
  for (const auto& [w, n, b] : bad) {
    const absl::Status valid = ShardedBatches::Validate(data, w, n, b);
    EXPECT_EQ(valid.code(), absl::StatusCode::kInvalidArgument)
        << w << "/" << n << "/" << b;
    EXPECT_FALSE(ShardedBatches::Create(data, w, n, b, 1).ok());
  }
  EXPECT_TRUE(ShardedBatches::Validate(data, 1, 2, 10).ok());
  EXPECT_EQ(ShardedBatches::Validate(Dataset{}, 0, 1, 1).code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tern::worker
