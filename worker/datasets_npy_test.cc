// --dataset=npy: .npy files written here byte by byte (as numpy's
// format.py lays them out), good and malformed.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/test_dir.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "torch/types.h"
#include "worker/datasets.h"

namespace tern::worker {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// A .npy file: magic, version, little-endian header length, the header
// dict padded with spaces and '\n' to a multiple of 64, then `data`.
std::string NpyFile(const std::string& dict, const std::string& data,
                    int major = 1) {
  const size_t length_bytes = major == 1 ? 2 : 4;
  std::string header = dict;
  while ((8 + length_bytes + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string file = "\x93NUMPY";
  file += static_cast<char>(major);
  file += '\0';
  for (size_t i = 0; i < length_bytes; ++i) {
    file += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  }
  return file + header + data;
}

std::string Dict(const std::string& descr, const std::vector<int64_t>& shape,
                 const std::string& fortran = "False") {
  std::string dims = absl::StrJoin(shape, ", ");
  if (shape.size() == 1) dims += ",";
  return absl::StrCat("{'descr': '", descr, "', 'fortran_order': ", fortran,
                      ", 'shape': (", dims, "), }");
}

template <typename T>
std::string Bytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()),
                     values.size() * sizeof(T));
}

void Write(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), bytes.size());
  ASSERT_TRUE(out.good()) << path;
}

std::vector<float> Floats(int64_t n, float scale) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(i % 7);
  return v;
}

// A good set: x float32 [n, 2, 3], labels i % 3.
void WriteGoodSet(const std::string& dir, int64_t train_n = 6,
                  int64_t test_n = 3) {
  for (const auto& [split, n] :
       {std::pair<std::string, int64_t>{"train", train_n}, {"test", test_n}}) {
    Write(dir + "/" + split + "_x.npy",
          NpyFile(Dict("<f4", {n, 2, 3}), Bytes(Floats(n * 6, 0.5f))));
    std::vector<int64_t> labels(n);
    for (int64_t i = 0; i < n; ++i) labels[i] = i % 3;
    Write(dir + "/" + split + "_y.npy",
          NpyFile(Dict("<i8", {n}), Bytes(labels)));
  }
}

TEST(NpyTest, LoadsFloatInputsAsGivenAndIntLabels) {
  for (const int major : {1, 2, 3}) {
    const std::string dir = FreshTestDir();
    WriteGoodSet(dir);
    // Rewrite train_x in this version; the others stay version 1.
    Write(dir + "/train_x.npy",
          NpyFile(Dict("<f4", {6, 2, 3}), Bytes(Floats(36, 0.5f)), major));
    auto sets = LoadDataset("npy", dir, 0);
    ASSERT_TRUE(sets.ok()) << sets.status();
    EXPECT_EQ(sets->train.images.sizes(), (std::vector<int64_t>{6, 1, 2, 3}));
    EXPECT_EQ(sets->test.images.sizes(), (std::vector<int64_t>{3, 1, 2, 3}));
    EXPECT_EQ(sets->train.shape.channels, 1);
    EXPECT_EQ(sets->train.shape.height, 2);
    EXPECT_EQ(sets->train.shape.width, 3);
    EXPECT_EQ(sets->train.shape.num_classes, 3);
    const std::vector<float> want = Floats(36, 0.5f);
    const torch::Tensor x = sets->train.images.contiguous();
    EXPECT_EQ(std::memcmp(x.data_ptr<float>(), want.data(), 36 * 4), 0)
        << "float32 inputs are used as given, version " << major;
    EXPECT_EQ(sets->train.labels.scalar_type(), torch::kInt64);
    EXPECT_EQ(sets->train.labels[4].item<int64_t>(), 1);
  }
}

TEST(NpyTest, ExampleRanksBecomeImages) {
  // example shape -> [C, H, W]
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>>
      cases = {{{}, {1, 1, 1}},
               {{5}, {1, 1, 5}},
               {{4, 5}, {1, 4, 5}},
               {{3, 4, 5}, {3, 4, 5}},
               {{2, 3, 4, 5}, {6, 4, 5}}};
  for (const auto& [example, image] : cases) {
    const std::string dir = FreshTestDir();
    WriteGoodSet(dir);
    for (const auto& [split, n] :
         {std::pair<std::string, int64_t>{"train", 6}, {"test", 3}}) {
      std::vector<int64_t> shape = {n};
      int64_t size = n;
      for (const int64_t d : example) {
        shape.push_back(d);
        size *= d;
      }
      Write(dir + "/" + split + "_x.npy",
            NpyFile(Dict("<f4", shape), Bytes(Floats(size, 1.0f))));
    }
    auto sets = LoadDataset("npy", dir, 0);
    ASSERT_TRUE(sets.ok()) << sets.status();
    EXPECT_EQ(sets->train.images.sizes().slice(1), image)
        << absl::StrJoin(example, ",");
  }
}

TEST(NpyTest, Uint8InputsAreNormalizedWithTrainingStatistics) {
  const std::string dir = FreshTestDir();
  WriteGoodSet(dir);
  std::vector<uint8_t> pixels(6 * 4);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = (i * 37) % 256;
  Write(dir + "/train_x.npy", NpyFile(Dict("|u1", {6, 4}), Bytes(pixels)));
  Write(dir + "/test_x.npy",
        NpyFile(
            Dict("|u1", {3, 4}),
            Bytes(std::vector<uint8_t>(pixels.begin(), pixels.begin() + 12))));
  auto sets = LoadDataset("npy", dir, 0);
  ASSERT_TRUE(sets.ok()) << sets.status();
  EXPECT_EQ(sets->train.images.scalar_type(), torch::kFloat32);
  EXPECT_NEAR(sets->train.images.mean().item<double>(), 0.0, 1e-5);
  EXPECT_NEAR(sets->train.images.std(/*unbiased=*/false).item<double>(), 1.0,
              1e-4);
}

TEST(NpyTest, FloatTargetsCountTheirValues) {
  const std::string dir = FreshTestDir();
  WriteGoodSet(dir);
  Write(dir + "/train_y.npy",
        NpyFile(Dict("<f4", {6, 2}), Bytes(Floats(12, 0.25f))));
  Write(dir + "/test_y.npy",
        NpyFile(Dict("<f4", {3, 2}), Bytes(Floats(6, 0.25f))));
  auto sets = LoadDataset("npy", dir, 0);
  ASSERT_TRUE(sets.ok()) << sets.status();
  EXPECT_EQ(sets->train.labels.scalar_type(), torch::kFloat32);
  EXPECT_EQ(sets->train.labels.sizes(), (std::vector<int64_t>{6, 2}));
  EXPECT_EQ(sets->train.shape.num_classes, 2);
  EXPECT_FLOAT_EQ(sets->train.labels[1][1].item<float>(), 0.75f);
}

TEST(NpyTest, ShardsLikeTheOtherSets) {
  const std::string dir = FreshTestDir();
  WriteGoodSet(dir, /*train_n=*/8, /*test_n=*/2);
  auto sets = LoadDataset("npy", dir, 0);
  ASSERT_TRUE(sets.ok()) << sets.status();
  std::vector<int64_t> seen;
  for (uint32_t w = 0; w < 2; ++w) {
    auto batches = ShardedBatches::Create(sets->train, w, 2, 2, /*seed=*/3);
    ASSERT_TRUE(batches.ok()) << batches.status();
    for (int b = 0; b < 2; ++b) {
      auto [x, y] = batches->Next();
      EXPECT_EQ(x.sizes(), (std::vector<int64_t>{2, 1, 2, 3}));
      for (int64_t i = 0; i < 2; ++i) seen.push_back(y[i].item<int64_t>());
    }
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, (std::vector<int64_t>{0, 0, 0, 1, 1, 1, 2, 2}));
}

// A malformed file: which file, its bytes, and what the error must name.
struct BadFile {
  std::string name;
  std::string file;
  std::string bytes;
  std::vector<std::string> expected;
};

std::string Magicless() { return "NOTNPY" + std::string(100, ' '); }

std::vector<BadFile> BadFiles() {
  const std::string x6 = Bytes(Floats(36, 1.0f));
  const std::string y6 = Bytes(std::vector<int64_t>(6, 1));
  std::string huge_length = NpyFile(Dict("<f4", {6, 2, 3}), x6);
  huge_length[8] = '\xff';
  huge_length[9] = '\xff';
  std::string version4 = NpyFile(Dict("<f4", {6, 2, 3}), x6);
  version4[6] = 4;
  return {
      {"magic", "train_x", Magicless(), {"train_x.npy", "magic"}},
      {"version", "train_x", version4, {"train_x.npy", "version 4.0"}},
      {"header_length", "train_x", huge_length, {"train_x.npy", "length"}},
      {"big_endian",
       "train_x",
       NpyFile(Dict(">f4", {6, 2, 3}), x6),
       {"train_x.npy", "'descr'", "big-endian"}},
      {"float64",
       "train_x",
       NpyFile(Dict("<f8", {6, 2, 3}), x6 + x6),
       {"train_x.npy", "'descr'", "<f8"}},
      {"int_inputs",
       "train_x",
       NpyFile(Dict("<i8", {6, 3}), x6),
       {"train_x.npy", "'descr'", "int64"}},
      {"uint8_labels",
       "train_y",
       NpyFile(Dict("|u1", {6}), std::string(6, '\1')),
       {"train_y.npy", "'descr'", "uint8"}},
      {"fortran",
       "train_x",
       NpyFile(Dict("<f4", {6, 2, 3}, "True"), x6),
       {"train_x.npy", "'fortran_order'"}},
      {"no_shape",
       "train_x",
       NpyFile("{'descr': '<f4', 'fortran_order': False, }", x6),
       {"train_x.npy", "lacks field 'shape'"}},
      {"extra_field",
       "train_x",
       NpyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (6, 6), "
               "'x': 1}",
               x6),
       {"train_x.npy", "'x'"}},
      {"bad_shape",
       "train_x",
       NpyFile("{'descr': '<f4', 'fortran_order': False, 'shape': [6, 6]}", x6),
       {"train_x.npy", "'shape'"}},
      {"truncated",
       "train_x",
       NpyFile(Dict("<f4", {6, 2, 3}), x6.substr(0, 100)),
       {"train_x.npy", "'shape'", "truncated"}},
      {"trailing",
       "train_x",
       NpyFile(Dict("<f4", {6, 2, 3}), x6 + "abcd"),
       {"train_x.npy", "trailing"}},
      // 2^40 elements declared in a file of about 1 KB.
      {"huge_shape",
       "train_x",
       NpyFile(Dict("<f4", {int64_t{1} << 20, int64_t{1} << 20}), x6),
       {"train_x.npy", "'shape'", "truncated"}},
      {"overflowing_shape",
       "train_x",
       NpyFile(Dict("<f4", {int64_t{1} << 61, int64_t{1} << 61}), x6),
       {"train_x.npy", "'shape'"}},
      {"dimension_too_large",
       "train_x",
       NpyFile("{'descr': '<f4', 'fortran_order': False, 'shape': "
               "(99999999999999999999,)}",
               x6),
       {"train_x.npy", "2^62"}},
      {"zero_examples",
       "train_x",
       NpyFile(Dict("<f4", {0, 2, 3}), ""),
       {"train_x.npy", "zero dimension"}},
      {"scalar",
       "train_x",
       NpyFile(Dict("<f4", {}), x6.substr(0, 4)),
       {"train_x.npy", "scalar"}},
      {"count_mismatch",
       "train_y",
       NpyFile(Dict("<i8", {5}), y6.substr(8)),
       {"train_x.npy", "train_y.npy", "'shape'", "6 examples"}},
      {"label_rank",
       "train_y",
       NpyFile(Dict("<i8", {6, 1}), y6),
       {"train_y.npy", "'shape'", "(N,)"}},
      {"negative_label",
       "train_y",
       NpyFile(Dict("<i8", {6}),
               Bytes(std::vector<int64_t>{0, 1, -1, 0, 0, 0})),
       {"train_y.npy", "label -1 of example 2"}},
      {"test_example_shape",
       "test_x",
       NpyFile(Dict("<f4", {3, 3, 2}), Bytes(Floats(18, 1.0f))),
       {"train_x.npy", "test_x.npy", "'shape'", "(3, 3, 2)"}},
      {"test_label_dtype",
       "test_y",
       NpyFile(Dict("<f4", {3}), Bytes(Floats(3, 1.0f))),
       {"train_y.npy", "test_y.npy", "'descr'"}},
  };
}

class BadNpyTest : public ::testing::TestWithParam<BadFile> {};

TEST_P(BadNpyTest, IsRefusedNamingTheFileAndField) {
  const BadFile& bad = GetParam();
  const std::string dir = FreshTestDir();
  WriteGoodSet(dir);
  Write(dir + "/" + bad.file + ".npy", bad.bytes);
  auto sets = LoadDataset("npy", dir, 0);
  ASSERT_FALSE(sets.ok());
  EXPECT_EQ(sets.status().code(), absl::StatusCode::kInvalidArgument)
      << sets.status();
  for (const std::string& part : bad.expected) {
    EXPECT_THAT(std::string(sets.status().message()), HasSubstr(part));
  }
}

INSTANTIATE_TEST_SUITE_P(Files, BadNpyTest, ::testing::ValuesIn(BadFiles()),
                         [](const ::testing::TestParamInfo<BadFile>& info) {
                           return info.param.name;
                         });

TEST(NpyTest, MissingFilesAndDirectoryAreNamed) {
  const std::string dir = FreshTestDir();
  WriteGoodSet(dir);
  fs::remove(dir + "/test_y.npy");
  auto sets = LoadDataset("npy", dir, 0);
  ASSERT_FALSE(sets.ok());
  EXPECT_EQ(sets.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(sets.status().message()),
              HasSubstr(dir + "/test_y.npy"));
  EXPECT_THAT(std::string(sets.status().message()), HasSubstr("--data_dir"));

  auto no_dir = LoadDataset("npy", "", 0);
  ASSERT_FALSE(no_dir.ok());
  EXPECT_EQ(no_dir.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(no_dir.status().message()), HasSubstr("--data_dir"));
}

}  // namespace
}  // namespace tern::worker
