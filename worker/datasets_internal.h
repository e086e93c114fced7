// What the files of the :datasets library share; worker/datasets.h is the
// public API and the only header other code includes. Each section names
// the file that defines it.
#ifndef TERN_WORKER_DATASETS_INTERNAL_H_
#define TERN_WORKER_DATASETS_INTERNAL_H_

#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/philox.h"
#include "torch/types.h"
#include "worker/datasets.h"

namespace tern::worker::datasets_internal {

// ------------------------------------------- files (datasets_files.cc) ---

struct GzCloser {
  void operator()(gzFile file) const { gzclose(file); }
};
using GzHandle = std::unique_ptr<gzFile_s, GzCloser>;

// Opens `path` (gzip or plain). NOT_FOUND when it does not exist; the
// status of errno for any other failure.
absl::StatusOr<GzHandle> OpenForReading(const std::string& path);

// Reads up to `size` bytes into `out` (appended). Returns how many were
// read: fewer than `size` only at the end of the data. A damaged gzip
// stream is INVALID_ARGUMENT naming the file.
absl::StatusOr<size_t> ReadBytes(gzFile file, const std::string& path,
                                 size_t size, std::vector<uint8_t>* out);

// Whether `file` has data left (an IDX/CIFAR file with trailing bytes is
// not the file its header describes).
absl::StatusOr<bool> HasMoreData(gzFile file, const std::string& path);

// The first of `candidates` that exists; NOT_FOUND naming the first
// candidate and `hint` otherwise.
absl::StatusOr<std::string> FindFile(const std::vector<std::string>& candidates,
                                     absl::string_view hint);

// The big-endian 32-bit number at `p` (IDX headers).
uint32_t BigEndian32(const uint8_t* p);

// --------------------------------------- tensors (datasets_tensors.cc) ---

// Normalizes train and test in place with the training statistics.
void Normalize(TrainTest* sets);

// Bytes (row-major [N,C,H,W]) to float32 in [0, 1].
torch::Tensor BytesToImages(const uint8_t* data, int64_t n, int64_t c,
                            int64_t h, int64_t w);

// INVALID_ARGUMENT naming `path` and the example when a label is not in
// [0, classes).
absl::Status CheckLabels(const uint8_t* labels, int64_t n, int64_t classes,
                         const std::string& path);

// ------------------------------------------------------------------ seeds ---

// Philox keys for tern's own draws here, kept apart from the codecs'
// streams (which are keyed by the run seed itself) by a SplitMix64 mix of
// the seed with a per-purpose constant.
inline PhiloxKey DomainKey(uint64_t seed, uint64_t domain) {
  uint64_t z = seed + domain * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return PhiloxKey{{static_cast<uint32_t>(z), static_cast<uint32_t>(z >> 32)}};
}

inline constexpr uint64_t kShuffleDomain = 0x5348554646ull;    // "SHUFF"
inline constexpr uint64_t kSyntheticDomain = 0x53594E5448ull;  // "SYNTH"

// ---------------------------------------------------------------- loaders ---

// The IDX pairs {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] in `dir`,
// normalized; `hint` says what provides missing files (datasets_idx.cc).
absl::StatusOr<TrainTest> LoadIdxSet(const std::string& dir,
                                     absl::string_view hint);

// The CIFAR-10 binary version in `dir` or `dir`/cifar-10-batches-bin,
// normalized (datasets_cifar10.cc).
absl::StatusOr<TrainTest> LoadCifar10(const std::string& dir);

// The synthetic set, a pure function of `seed` (datasets_synthetic.cc).
TrainTest MakeSynthetic(uint64_t seed);

// train_x/train_y/test_x/test_y.npy in `dir`, memory-mapped (datasets_npy.cc;
// datasets.h says what they may hold).
absl::StatusOr<TrainTest> LoadNpySet(const std::string& dir);

// ----------------------------------------- npy (datasets_npy_header.cc) ---

// What tern reads of a .npy header: the element type (float32, int64 or
// uint8, little-endian), the C-order shape, and where the data starts.
struct NpyHeader {
  torch::Dtype dtype = torch::kFloat32;
  std::vector<int64_t> shape;
  size_t data_offset = 0;
};

// Parses the header at the start of the `size` bytes of file `path`.
// INVALID_ARGUMENT naming the file and the field for a bad magic, a version
// other than 1.0/2.0/3.0, a header length past the file, a dict field that
// is missing, repeated or unknown, another dtype, big-endian data, Fortran
// order, or a shape that is not a tuple of integers below 2^62. The shape
// is not checked against the file's size here (MapNpy does that).
absl::StatusOr<NpyHeader> ParseNpyHeader(const uint8_t* bytes, size_t size,
                                         const std::string& path);

}  // namespace tern::worker::datasets_internal

#endif  // TERN_WORKER_DATASETS_INTERNAL_H_
