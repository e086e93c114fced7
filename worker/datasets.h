// The training data of a worker (DESIGN section 1: worker/ holds the data):
// loaders for the image sets the TernGrad, Dryden et al. and Aji & Heafield
// experiments use, a synthetic set for tests and smoke runs, and each
// worker's deterministic shard of every epoch.
//
// Files are read with zlib's gzread, which reads gzip-compressed and plain
// files alike; every size, magic number and label is checked, and a bad
// file is a status naming it, never a crash.
#ifndef TERN_WORKER_DATASETS_H_
#define TERN_WORKER_DATASETS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "ATen/core/Tensor.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/input_shape.h"

namespace tern::worker {

struct Dataset {
  at::Tensor images;  // [N,C,H,W] float32, normalized
  // [N] int64, in [0, shape.num_classes); npy may hold float32 targets.
  at::Tensor labels;
  InputShape shape;
};

struct TrainTest {
  Dataset train, test;
};

// Where Fashion-MNIST is found when no directory is given: the Debian
// package dataset-fashion-mnist installs it there.
inline constexpr absl::string_view kDefaultFashionMnistDir =
    "/usr/share/datasets/fashion-mnist";

// Loads the named data set from `dir`:
//   "fashion-mnist"  IDX files {train,t10k}-{images-idx3,labels-idx1}-ubyte
//                    (.gz or plain); `dir` defaults to kDefaultFashionMnistDir.
//   "mnist"          the same IDX files; `dir` is required.
//   "cifar10"        CIFAR-10 binary version: data_batch_1..5.bin and
//                    test_batch.bin, in `dir` or `dir`/cifar-10-batches-bin;
//                    `dir` is required.
//   "synthetic"      1x28x28 images in 10 classes, 6000 train / 1000 test,
//                    a pure function of `seed` (`dir` is ignored), drawn from
//                    a fixed random generative teacher: each class is a smooth
//                    random pattern, each image its class's pattern plus
//                    smooth nuisance patterns and pixel noise. LeNet and the
//                    MLP lower the loss on it within a few dozen SGD steps.
//   "npy"            train_x.npy, train_y.npy, test_x.npy, test_y.npy in
//                    `dir` (required), NumPy .npy files (format 1.0-3.0,
//                    little-endian, C order), memory-mapped. x: float32 or
//                    uint8, shape [N, ...]; y: int64 labels [N] (classes =
//                    the largest label + 1, below 2^20) or float32 targets
//                    [N, ...] (shape.num_classes = values per example).
//                    Train and test agree in dtype and in the shape past N.
//                    Examples of shape [D] are viewed as [1,1,D], [H,W] as
//                    [1,H,W], [C,H,W] as they are, higher ranks fold their
//                    leading dims into C. Float32 inputs are used as given
//                    and stay in the mapping (no copy, no normalization);
//                    uint8 inputs are scaled and normalized like the images
//                    below (a float32 copy).
// Except for float32 npy inputs, images are normalized per channel to mean
// 0 and standard deviation 1 with the statistics of the training images (the
// same transform for the test images); for the real sets these are the
// published numbers, e.g.
// Fashion-MNIST 0.2860 / 0.3530, MNIST 0.1307 / 0.3081.
// Errors: INVALID_ARGUMENT for an unknown name (listing the valid ones), a
// missing required `dir`, or a file with a bad magic number, header, size or
// label (naming the file), and an npy file with a bad header field, dtype,
// shape or size (naming the file and the field); NOT_FOUND naming a missing
// file and what provides it (the dataset-fashion-mnist package, or
// --data_dir).
absl::StatusOr<TrainTest> LoadDataset(absl::string_view name,
                                      const std::string& dir, uint64_t seed);

// The names LoadDataset accepts.
std::vector<std::string> DatasetNames();

// One IDX file (LeCun's MNIST format): unsigned-byte data, big-endian
// dimensions. Exposed for tests and tools; LoadDataset uses it.
struct IdxArray {
  std::vector<int64_t> dims;
  std::vector<uint8_t> data;  // row-major, product(dims) bytes
};

// Reads `path` (gzip or plain). NOT_FOUND when it cannot be opened;
// INVALID_ARGUMENT naming the file when the magic number is not that of an
// unsigned-byte array, a dimension is zero, or the data is shorter or
// longer than the header says.
absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path);

// Worker `worker` of `num_workers`' deterministic stream of mini-batches.
//
// Epoch e is a permutation of all training examples, a pure function of
// (seed, e) by a Philox-keyed Fisher-Yates shuffle (DESIGN section 2:
// independent of thread count and of libtorch's generator). Worker w takes
// positions w, w+N, w+2N, ... of it and cuts them into batches of
// batch_size. Every worker has the same batches_per_epoch() =
// floor(examples / (N * batch_size)), so all workers cross epoch boundaries at
// the same step; the remaining positions (fewer than N * batch_size, the last
// partial batches) are dropped. The batches of the N workers in one epoch are
// disjoint and cover the first N * batch_size * batches_per_epoch() positions.
//
// Holds handles to the data set's tensors (no copy). Not thread-safe.
class ShardedBatches {
 public:
  // Checks what the constructor requires: num_workers > 0, worker <
  // num_workers, batch_size > 0, a non-empty data set whose images and labels
  // agree in count, and at least num_workers * batch_size examples. These
  // come from flags, so callers check them with Validate (or use Create)
  // before constructing.
  static absl::Status Validate(const Dataset& data, uint32_t worker,
                               uint32_t num_workers, uint32_t batch_size);
  // Validate, then construct.
  static absl::StatusOr<ShardedBatches> Create(const Dataset& data,
                                               uint32_t worker,
                                               uint32_t num_workers,
                                               uint32_t batch_size,
                                               uint64_t seed);

  // Throws c10::Error, as libtorch's own precondition checks do, if
  // Validate fails: a caller bug once flags are validated.
  ShardedBatches(const Dataset& data, uint32_t worker, uint32_t num_workers,
                 uint32_t batch_size, uint64_t seed);

  // Returns {images [B,C,H,W], labels [B]}; moves to the next epoch
  // transparently.
  std::pair<at::Tensor, at::Tensor> Next();

  // The epoch of the batch the next call of Next() returns (0 at first).
  uint64_t epoch() const;
  uint64_t batches_per_epoch() const;

  // How many batches Next() has returned, and a jump to any point of the
  // stream: after Seek(k), Next() returns what the (k+1)-th call would have.
  // A restarted worker resumes its data where its checkpoint left off.
  uint64_t position() const { return position_; }
  void Seek(uint64_t position);

 private:
  // Positions 0..n-1 of epoch `epoch`'s permutation of [0, n).
  void Shuffle(uint64_t epoch);

  Dataset data_;
  uint32_t worker_;
  uint32_t num_workers_;
  uint32_t batch_size_;
  uint64_t seed_;
  uint64_t batches_per_epoch_;
  uint64_t position_ = 0;
  // The permutation of the epoch `permutation_epoch_`, computed lazily.
  std::vector<int64_t> permutation_;
  uint64_t permutation_epoch_ = ~uint64_t{0};
};

}  // namespace tern::worker

#endif  // TERN_WORKER_DATASETS_H_
