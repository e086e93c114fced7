// Image bytes to normalized float tensors, and the check of the labels.
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "worker/datasets_internal.h"

namespace tern::worker::datasets_internal {
namespace {

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

}  // namespace

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

}  // namespace tern::worker::datasets_internal
