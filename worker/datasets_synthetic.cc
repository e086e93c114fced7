// The synthetic set: images drawn from a fixed random generative teacher.
#include <algorithm>
#include <cmath>
#include <vector>

#include "common/philox.h"
#include "worker/datasets_internal.h"

namespace tern::worker::datasets_internal {
namespace {

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
  // What torch::nn::functional::interpolate runs for a bilinear resize to a
  // given size (no scale factors), without parsing libtorch's nn API.
  return at::upsample_bilinear2d(coarse, {kSyntheticSide, kSyntheticSide},
                                 /*align_corners=*/false)
      .reshape({count, kSyntheticSide * kSyntheticSide});
}

}  // namespace

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

}  // namespace tern::worker::datasets_internal
