#include "worker/max_pool.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ATen/Parallel.h"
#include "torch/csrc/autograd/custom_function.h"
#include "torch/types.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace tern::worker {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// Which of a window's values wins, in max_pool2d's scan: a later value
// replaces the maximum so far if it is greater or NaN. Windows are scanned
// as two pairs (a, b) and (c, d) and then the pairs' winners, which picks
// the same element as the row-major scan: the first maximum, or the last
// NaN. The index is the winner's place in the window: row * 2 + column.
inline bool Later(float first, float second) {
  return second > first || std::isnan(second);
}

void Window1(const float* r0, const float* r1, float* out, uint8_t* index) {
  const bool take_b = Later(r0[0], r0[1]), take_d = Later(r1[0], r1[1]);
  const float top = take_b ? r0[1] : r0[0];
  const float bottom = take_d ? r1[1] : r1[0];
  const bool take_bottom = Later(top, bottom);
  *out = take_bottom ? bottom : top;
  *index = static_cast<uint8_t>(take_bottom ? 2 + take_d : take_b);
}

#if defined(__SSE2__)
__m128 LaterMask(__m128 first, __m128 second) {
  return _mm_or_ps(_mm_cmpgt_ps(second, first),
                   _mm_cmpunord_ps(second, second));
}

__m128 Pick(__m128 mask, __m128 if_set, __m128 if_clear) {
  return _mm_or_ps(_mm_and_ps(mask, if_set), _mm_andnot_ps(mask, if_clear));
}

// Four windows side by side: columns 0..7 of rows r0 and r1.
void Window4(const float* r0, const float* r1, float* out, uint8_t* index) {
  const __m128 r0_lo = _mm_loadu_ps(r0), r0_hi = _mm_loadu_ps(r0 + 4);
  const __m128 r1_lo = _mm_loadu_ps(r1), r1_hi = _mm_loadu_ps(r1 + 4);
  const __m128 a = _mm_shuffle_ps(r0_lo, r0_hi, _MM_SHUFFLE(2, 0, 2, 0));
  const __m128 b = _mm_shuffle_ps(r0_lo, r0_hi, _MM_SHUFFLE(3, 1, 3, 1));
  const __m128 c = _mm_shuffle_ps(r1_lo, r1_hi, _MM_SHUFFLE(2, 0, 2, 0));
  const __m128 d = _mm_shuffle_ps(r1_lo, r1_hi, _MM_SHUFFLE(3, 1, 3, 1));
  const __m128 take_b = LaterMask(a, b), take_d = LaterMask(c, d);
  const __m128 top = Pick(take_b, b, a), bottom = Pick(take_d, d, c);
  const __m128 take_bottom = LaterMask(top, bottom);
  _mm_storeu_ps(out, Pick(take_bottom, bottom, top));
  const __m128i column = _mm_castps_si128(Pick(take_bottom, take_d, take_b));
  const __m128i k = _mm_or_si128(
      _mm_and_si128(_mm_castps_si128(take_bottom), _mm_set1_epi32(2)),
      _mm_and_si128(column, _mm_set1_epi32(1)));
  const __m128i bytes =
      _mm_packus_epi16(_mm_packs_epi32(k, k), _mm_setzero_si128());
  const int32_t four = _mm_cvtsi128_si32(bytes);
  std::memcpy(index, &four, sizeof(four));
}
#endif

// One output row: windows from input rows r0 and r1.
void PoolRow(const float* r0, const float* r1, int64_t width, float* out,
             uint8_t* index) {
  int64_t j = 0;
#if defined(__SSE2__)
  // The last group of four is moved back to end at the row's end, so a
  // row of 4 or more windows needs no scalar tail (some are done twice).
  for (; width >= 4 && j < width; j += 4) {
    const int64_t at = std::min(j, width - 4);
    Window4(r0 + 2 * at, r1 + 2 * at, out + at, index + at);
  }
#endif
  for (; j < width; ++j) {
    Window1(r0 + 2 * j, r1 + 2 * j, out + j, index + j);
  }
}

struct Shape {
  int64_t planes, height, width;  // of the input; N * C planes
  int64_t out_height() const { return height / 2; }
  int64_t out_width() const { return width / 2; }
};

void PoolForward(const Shape& s, const float* in, float* out, uint8_t* index) {
  const int64_t oh = s.out_height(), ow = s.out_width();
  at::parallel_for(0, s.planes, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      for (int64_t i = 0; i < oh; ++i) {
        const float* r0 = in + (p * s.height + 2 * i) * s.width;
        const int64_t o = (p * oh + i) * ow;
        PoolRow(r0, r0 + s.width, ow, out + o, index + o);
      }
    }
  });
}

// grad_in must be zero; each output's gradient goes to its winner.
void PoolBackward(const Shape& s, const float* grad_out, const uint8_t* index,
                  float* grad_in) {
  const int64_t oh = s.out_height(), ow = s.out_width();
  at::parallel_for(0, s.planes, 1, [&](int64_t begin, int64_t end) {
    for (int64_t p = begin; p < end; ++p) {
      for (int64_t i = 0; i < oh; ++i) {
        float* r0 = grad_in + (p * s.height + 2 * i) * s.width;
        const int64_t o = (p * oh + i) * ow;
        for (int64_t j = 0; j < ow; ++j) {
          const uint8_t k = index[o + j];
          r0[(k >> 1) * s.width + 2 * j + (k & 1)] = grad_out[o + j];
        }
      }
    }
  });
}

class MaxPool2x2Function
    : public torch::autograd::Function<MaxPool2x2Function> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x) {
    const torch::Tensor in = x.contiguous();
    const Shape s{in.size(0) * in.size(1), in.size(2), in.size(3)};
    const std::vector<int64_t> out_sizes = {in.size(0), in.size(1),
                                            s.out_height(), s.out_width()};
    torch::Tensor out = torch::empty(out_sizes, in.options());
    torch::Tensor index =
        torch::empty(out_sizes, in.options().dtype(torch::kUInt8));
    PoolForward(s, in.data_ptr<float>(), out.data_ptr<float>(),
                index.data_ptr<uint8_t>());
    ctx->save_for_backward({index});
    ctx->saved_data["sizes"] = in.sizes();
    return out;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const torch::Tensor index = ctx->get_saved_variables()[0];
    const std::vector<int64_t> sizes = ctx->saved_data["sizes"].toIntVector();
    const torch::Tensor grad_out = grads[0].contiguous();
    torch::Tensor grad_in = torch::zeros(sizes, grad_out.options());
    const Shape s{sizes[0] * sizes[1], sizes[2], sizes[3]};
    PoolBackward(s, grad_out.data_ptr<float>(), index.data_ptr<uint8_t>(),
                 grad_in.data_ptr<float>());
    return {grad_in};
  }
};

}  // namespace

torch::Tensor MaxPool2x2(const torch::Tensor& x) {
  const bool own_loop = x.dim() == 4 && x.device().is_cpu() &&
                        x.scalar_type() == torch::kFloat32 &&
                        x.layout() == torch::kStrided && x.size(2) >= 2 &&
                        x.size(3) >= 2;
  // What torch::nn::functional::max_pool2d(x, MaxPool2dFuncOptions(2)) runs.
  if (!own_loop) return at::max_pool2d(x, {2, 2}, {2, 2});
  return MaxPool2x2Function::apply(x);
}

}  // namespace tern::worker
