#include "worker/datasets.h"

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <filesystem>
#include <memory>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/philox.h"
#include "common/status_macros.h"

namespace tern::worker {
namespace {

// ---------------------------------------------------------------- files ---

struct GzCloser {
  void operator()(gzFile file) const { gzclose(file); }
};
using GzHandle = std::unique_ptr<gzFile_s, GzCloser>;

absl::StatusOr<GzHandle> OpenForReading(const std::string& path) {
  errno = 0;
  GzHandle file(gzopen(path.c_str(), "rb"));
  if (file == nullptr) {
    const int error = errno;
    if (error == ENOENT) {
      return absl::NotFoundError(absl::StrCat(path, " not found"));
    }
    return absl::ErrnoToStatus(error, absl::StrCat("cannot open ", path));
  }
  return file;
}

// Reads up to `size` bytes into `out` (appended). Returns how many were
// read: fewer than `size` only at the end of the data. A damaged gzip
// stream is INVALID_ARGUMENT naming the file.
absl::StatusOr<size_t> ReadBytes(gzFile file, const std::string& path,
                                 size_t size, std::vector<uint8_t>* out) {
  // Grow the buffer as data arrives rather than trusting a header's size:
  // a corrupt header cannot make us allocate gigabytes for a small file.
  constexpr size_t kBlock = size_t{1} << 20;
  size_t done = 0;
  while (done < size) {
    const size_t want = std::min(kBlock, size - done);
    const size_t old_size = out->size();
    out->resize(old_size + want);
    const int got =
        gzread(file, out->data() + old_size, static_cast<unsigned>(want));
    if (got < 0) {
      int code = 0;
      const char* message = gzerror(file, &code);
      out->resize(old_size);
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": corrupt data: ", message));
    }
    out->resize(old_size + static_cast<size_t>(got));
    done += static_cast<size_t>(got);
    if (static_cast<size_t>(got) < want) break;
  }
  return done;
}

// Whether `file` has data left (an IDX/CIFAR file with trailing bytes is
// not the file its header describes).
absl::StatusOr<bool> HasMoreData(gzFile file, const std::string& path) {
  std::vector<uint8_t> probe;
  TERN_ASSIGN_OR_RETURN(const size_t got, ReadBytes(file, path, 1, &probe));
  return got > 0;
}

// The first of `candidates` that exists; NOT_FOUND naming the first
// candidate and `hint` otherwise.
absl::StatusOr<std::string> FindFile(const std::vector<std::string>& candidates,
                                     absl::string_view hint) {
  for (const std::string& path : candidates) {
    std::error_code error;
    if (std::filesystem::is_regular_file(path, error)) return path;
  }
  std::string tried;
  if (candidates.size() > 1) {
    tried = absl::StrCat(
        " (nor ", absl::StrJoin(candidates.begin() + 1, candidates.end(), ", "),
        ")");
  }
  return absl::NotFoundError(
      absl::StrCat(candidates.front(), " not found", tried, "; ", hint));
}

uint32_t BigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) |
         (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

// --------------------------------------------------------- normalization ---

// Per-channel mean and standard deviation of `images` [N,C,H,W] float32,
// accumulated in double.
std::pair<std::vector<double>, std::vector<double>> ChannelStats(
    const torch::Tensor& images) {
  const torch::Tensor x = images.contiguous();
  const int64_t n = x.size(0), channels = x.size(1);
  const int64_t plane = x.size(2) * x.size(3);
  const float* data = x.data_ptr<float>();
  std::vector<double> mean(channels, 0.0), stddev(channels, 1.0);
  for (int64_t c = 0; c < channels; ++c) {
    double sum = 0, sum_sq = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float* p = data + (i * channels + c) * plane;
      for (int64_t k = 0; k < plane; ++k) {
        sum += p[k];
        sum_sq += static_cast<double>(p[k]) * p[k];
      }
    }
    const double count = static_cast<double>(n * plane);
    mean[c] = sum / count;
    const double var = std::max(sum_sq / count - mean[c] * mean[c], 0.0);
    // A constant channel carries no information; leave its scale alone
    // rather than divide by zero.
    stddev[c] = var > 1e-12 ? std::sqrt(var) : 1.0;
  }
  return {mean, stddev};
}

// Normalizes train and test in place with the training statistics.
void Normalize(TrainTest* sets) {
  const auto [mean, stddev] = ChannelStats(sets->train.images);
  const int64_t channels = static_cast<int64_t>(mean.size());
  const torch::Tensor m =
      torch::tensor(std::vector<float>(mean.begin(), mean.end()))
          .view({1, channels, 1, 1});
  const torch::Tensor s =
      torch::tensor(std::vector<float>(stddev.begin(), stddev.end()))
          .view({1, channels, 1, 1});
  for (Dataset* d : {&sets->train, &sets->test}) {
    d->images.sub_(m).div_(s);
  }
}

// Bytes (row-major [N,C,H,W]) to float32 in [0, 1].
torch::Tensor BytesToImages(const uint8_t* data, int64_t n, int64_t c,
                            int64_t h, int64_t w) {
  return torch::from_blob(const_cast<uint8_t*>(data), {n, c, h, w},
                          torch::kUInt8)
      .to(torch::kFloat32)
      .div_(255.0f);
}

absl::Status CheckLabels(const uint8_t* labels, int64_t n, int64_t classes,
                         const std::string& path) {
  for (int64_t i = 0; i < n; ++i) {
    if (labels[i] >= classes) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": label ", labels[i], " of example ", i,
                       " is out of range [0, ", classes, ")"));
    }
  }
  return absl::OkStatus();
}

// ------------------------------------------------------------ IDX (MNIST) ---

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

// --------------------------------------------------------------- CIFAR-10 ---

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

// -------------------------------------------------------------- synthetic ---

// Philox keys for tern's own draws here, kept apart from the codecs'
// streams (which are keyed by the run seed itself) by a SplitMix64 mix of
// the seed with a per-purpose constant.
PhiloxKey DomainKey(uint64_t seed, uint64_t domain) {
  uint64_t z = seed + domain * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return PhiloxKey{{static_cast<uint32_t>(z), static_cast<uint32_t>(z >> 32)}};
}

constexpr uint64_t kShuffleDomain = 0x5348554646ull;    // "SHUFF"
constexpr uint64_t kSyntheticDomain = 0x53594E5448ull;  // "SYNTH"

constexpr double kTwoPi = 6.283185307179586476925286766559;

// Standard normal draws, a pure function of (key, stream, index): Box-Muller
// over pairs of Philox words.
class NormalStream {
 public:
  NormalStream(PhiloxKey key, uint32_t stream) : key_(key), stream_(stream) {}

  // Fills `out` with the draws index 0, 1, ... of this stream.
  void Fill(float* out, int64_t count) const {
    for (int64_t i = 0; i < count; i += 4) {
      const uint64_t group = static_cast<uint64_t>(i / 4);
      const PhiloxCounter words = Philox4x32_10(
          PhiloxCounter{{static_cast<uint32_t>(group),
                         static_cast<uint32_t>(group >> 32), stream_, 0}},
          key_);
      for (int pair = 0; pair < 2; ++pair) {
        // u1 in (0, 1] keeps the logarithm finite.
        const double u1 = 1.0 - UniformFloat(words.v[2 * pair]);
        const double u2 = UniformFloat(words.v[2 * pair + 1]);
        const double r = std::sqrt(-2.0 * std::log(u1));
        const double theta = kTwoPi * u2;
        const int64_t k = i + 2 * pair;
        if (k < count) out[k] = static_cast<float>(r * std::cos(theta));
        if (k + 1 < count) out[k + 1] = static_cast<float>(r * std::sin(theta));
      }
    }
  }

  torch::Tensor Tensor(at::IntArrayRef sizes) const {
    torch::Tensor t = torch::empty(sizes, torch::kFloat32);
    Fill(t.data_ptr<float>(), t.numel());
    return t;
  }

 private:
  PhiloxKey key_;
  uint32_t stream_;
};

constexpr int64_t kSyntheticTrain = 6000;
constexpr int64_t kSyntheticTest = 1000;
constexpr int64_t kSyntheticClasses = 10;
constexpr int64_t kSyntheticNuisances = 8;
constexpr int64_t kSyntheticSide = 28;
constexpr int64_t kSyntheticCoarse = 7;
// Amplitudes of the class patterns, the nuisance patterns and the pixel
// noise. A weaker signal (0.3 or less) leaves a few dozen steps of batch 8
// too few examples to find the classes under the noise.
constexpr float kSyntheticSignal = 1.5f;
constexpr float kSyntheticNuisance = 0.5f;
constexpr float kSyntheticNoise = 1.0f;

// `count` smooth random 28x28 patterns, rows of the result: 7x7 grids of
// Gaussian draws upsampled bilinearly, so that neighbouring pixels agree as
// in natural images and convolutions have local structure to find.
torch::Tensor SmoothPatterns(const NormalStream& stream, int64_t count) {
  const torch::Tensor coarse =
      stream.Tensor({count, 1, kSyntheticCoarse, kSyntheticCoarse});
  return torch::nn::functional::interpolate(
             coarse,
             torch::nn::functional::InterpolateFuncOptions()
                 .size(std::vector<int64_t>{kSyntheticSide, kSyntheticSide})
                 .mode(torch::kBilinear)
                 .align_corners(false))
      .reshape({count, kSyntheticSide * kSyntheticSide});
}

// A random generative teacher: 10 smooth class patterns P_k and 8 smooth
// nuisance patterns Q_j, drawn once from the seed. Example i has label
// y_i uniform in [0, 10) and image
//   x_i = signal * P_{y_i} + nuisance * sum_j c_ij Q_j + noise * e_i,
// with c_ij and the pixel noise e_i standard normal. Every pixel is noisy,
// but the classes differ over the whole image, so a linear readout of the
// pixels is nearly always right and LeNet and the MLP lower the loss
// within a few dozen SGD steps.
TrainTest MakeSynthetic(uint64_t seed) {
  const PhiloxKey key = DomainKey(seed, kSyntheticDomain);
  const int64_t total = kSyntheticTrain + kSyntheticTest;
  const int64_t pixels = kSyntheticSide * kSyntheticSide;
  const torch::Tensor classes =
      SmoothPatterns(NormalStream(key, 0), kSyntheticClasses);
  const torch::Tensor nuisances =
      SmoothPatterns(NormalStream(key, 1), kSyntheticNuisances);
  torch::Tensor labels = torch::empty({total}, torch::kInt64);
  {
    // Uniform labels by the multiply-shift map of a 32-bit Philox word.
    int64_t* y = labels.data_ptr<int64_t>();
    for (int64_t i = 0; i < total; i += 4) {
      const PhiloxCounter words = Philox4x32_10(
          PhiloxCounter{{static_cast<uint32_t>(i / 4), 0, 2, 0}}, key);
      for (int64_t k = i; k < std::min(i + 4, total); ++k) {
        y[k] = static_cast<int64_t>(
            (uint64_t{words.v[k - i]} * kSyntheticClasses) >> 32);
      }
    }
  }
  const torch::Tensor coefficients =
      NormalStream(key, 3).Tensor({total, kSyntheticNuisances});
  const torch::Tensor noise = NormalStream(key, 4).Tensor({total, pixels});
  const torch::Tensor images =
      (kSyntheticSignal * classes.index_select(0, labels) +
       kSyntheticNuisance * coefficients.matmul(nuisances) +
       kSyntheticNoise * noise)
          .view({total, 1, kSyntheticSide, kSyntheticSide});

  const InputShape shape{1, kSyntheticSide, kSyntheticSide, kSyntheticClasses};
  TrainTest sets;
  sets.train = Dataset{images.slice(0, 0, kSyntheticTrain).clone(),
                       labels.slice(0, 0, kSyntheticTrain).clone(), shape};
  sets.test = Dataset{images.slice(0, kSyntheticTrain, total).clone(),
                      labels.slice(0, kSyntheticTrain, total).clone(), shape};
  Normalize(&sets);
  return sets;
}

}  // namespace

// ------------------------------------------------------------- public API ---

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

std::vector<std::string> DatasetNames() {
  return {"fashion-mnist", "mnist", "cifar10", "synthetic"};
}

absl::StatusOr<TrainTest> LoadDataset(absl::string_view name,
                                      const std::string& dir, uint64_t seed) {
  if (name == "fashion-mnist") {
    const std::string where =
        dir.empty() ? std::string(kDefaultFashionMnistDir) : dir;
    return LoadIdxSet(
        where, absl::StrCat("install the dataset-fashion-mnist package (it "
                            "provides ",
                            kDefaultFashionMnistDir,
                            ") or point --data_dir at the Fashion-MNIST IDX "
                            "files"));
  }
  if (name == "mnist" || name == "cifar10") {
    if (dir.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("dataset ", name, " needs --data_dir"));
    }
    if (name == "cifar10") return LoadCifar10(dir);
    return LoadIdxSet(dir,
                      "point --data_dir at the MNIST IDX files "
                      "({train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz])");
  }
  if (name == "synthetic") return MakeSynthetic(seed);
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown dataset \"", name,
      "\"; valid datasets: ", absl::StrJoin(DatasetNames(), ", ")));
}

// --------------------------------------------------------- ShardedBatches ---

absl::Status ShardedBatches::Validate(const Dataset& data, uint32_t worker,
                                      uint32_t num_workers,
                                      uint32_t batch_size) {
  if (num_workers == 0 || worker >= num_workers) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker ", worker, " of ", num_workers, ": need worker < num_workers"));
  }
  if (batch_size == 0) {
    return absl::InvalidArgumentError("batch size must be positive");
  }
  if (!data.images.defined() || !data.labels.defined() ||
      data.images.dim() != 4 || data.labels.dim() != 1 ||
      data.images.size(0) != data.labels.size(0)) {
    return absl::InvalidArgumentError(
        "data set needs images [N,C,H,W] and labels [N] of the same N");
  }
  const uint64_t n = static_cast<uint64_t>(data.images.size(0));
  const uint64_t per_step = uint64_t{num_workers} * batch_size;
  if (n < per_step) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the data set has ", n, " training examples, fewer than ", num_workers,
        " workers x batch size ", batch_size, " = ", per_step));
  }
  return absl::OkStatus();
}

absl::StatusOr<ShardedBatches> ShardedBatches::Create(const Dataset& data,
                                                      uint32_t worker,
                                                      uint32_t num_workers,
                                                      uint32_t batch_size,
                                                      uint64_t seed) {
  TERN_RETURN_IF_ERROR(Validate(data, worker, num_workers, batch_size));
  return ShardedBatches(data, worker, num_workers, batch_size, seed);
}

ShardedBatches::ShardedBatches(const Dataset& data, uint32_t worker,
                               uint32_t num_workers, uint32_t batch_size,
                               uint64_t seed)
    : data_(data),
      worker_(worker),
      num_workers_(num_workers),
      batch_size_(batch_size),
      seed_(seed) {
  const absl::Status valid = Validate(data, worker, num_workers, batch_size);
  TORCH_CHECK(valid.ok(), "ShardedBatches: ", valid.ToString());
  batches_per_epoch_ = static_cast<uint64_t>(data.images.size(0)) /
                       (uint64_t{num_workers} * batch_size);
}

uint64_t ShardedBatches::epoch() const {
  return position_ / batches_per_epoch_;
}

uint64_t ShardedBatches::batches_per_epoch() const {
  return batches_per_epoch_;
}

void ShardedBatches::Seek(uint64_t position) { position_ = position; }

void ShardedBatches::Shuffle(uint64_t epoch) {
  const int64_t n = data_.images.size(0);
  permutation_.resize(n);
  std::iota(permutation_.begin(), permutation_.end(), int64_t{0});
  const PhiloxKey key = DomainKey(seed_, kShuffleDomain);
  // Fisher-Yates: draw d (d = 0, 1, ...) picks j uniformly in [0, i] for
  // i = n-1-d from the 64-bit value of two Philox words; the multiply-shift
  // map's bias is below n / 2^64.
  PhiloxCounter words{};
  for (int64_t i = n - 1; i > 0; --i) {
    const uint64_t draw = static_cast<uint64_t>(n - 1 - i);
    if (draw % 2 == 0) {
      const uint64_t group = draw / 2;
      words = Philox4x32_10(PhiloxCounter{{static_cast<uint32_t>(group),
                                           static_cast<uint32_t>(group >> 32),
                                           static_cast<uint32_t>(epoch),
                                           static_cast<uint32_t>(epoch >> 32)}},
                            key);
    }
    const int half = static_cast<int>(draw % 2) * 2;
    const uint64_t r =
        (uint64_t{words.v[half]} << 32) | uint64_t{words.v[half + 1]};
    const int64_t j = static_cast<int64_t>(
        (static_cast<unsigned __int128>(r) * static_cast<uint64_t>(i + 1)) >>
        64);
    std::swap(permutation_[i], permutation_[j]);
  }
  permutation_epoch_ = epoch;
}

std::pair<torch::Tensor, torch::Tensor> ShardedBatches::Next() {
  const uint64_t epoch = position_ / batches_per_epoch_;
  const uint64_t batch = position_ % batches_per_epoch_;
  if (epoch != permutation_epoch_) Shuffle(epoch);
  torch::Tensor index = torch::empty({batch_size_}, torch::kInt64);
  int64_t* idx = index.data_ptr<int64_t>();
  for (uint32_t j = 0; j < batch_size_; ++j) {
    const uint64_t pos = (batch * batch_size_ + j) * num_workers_ + worker_;
    idx[j] = permutation_[pos];
  }
  ++position_;
  return {data_.images.index_select(0, index),
          data_.labels.index_select(0, index)};
}

}  // namespace tern::worker
