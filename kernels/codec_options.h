// Everything that configures a codec. A run's options travel to the shards
// in the join (tern.v1.RunConfig.codec_params), so that a shard re-encodes
// pulls exactly as the workers encode pushes.
#ifndef TERN_KERNELS_CODEC_OPTIONS_H_
#define TERN_KERNELS_CODEC_OPTIONS_H_

#include <cstdint>

#include "kernels/payload.h"

namespace tern::kernels {

// Where the dropping codec's threshold comes from (Aji & Heafield 2017
// compare both).
enum class DropScope : uint32_t {
  // One threshold for the whole gradient: the worker selects it over all
  // chunks and passes it in EncodeContext::threshold.
  kGlobal = 0,
  // One threshold per chunk (= per tensor below partition_bytes), selected
  // by the codec itself.
  kPerTensor = 1,
};

// How the dropping codec sends the values that survive the threshold (Aji &
// Heafield 2017; the value is CodecParams.drop_survivors on the wire).
enum class DropSurvivors : uint32_t {
  // (index, float32 value) pairs, LAYOUT_INDEX_VALUE (section 4).
  kValues = 0,
  // A sign bit each, reconstructed as the chunk's mean of the kept positive
  // or of the kept negative values, LAYOUT_INDEX_SIGN: the 1-bit "average"
  // quantization of section 5.4, which slowed NMT's convergence there.
  k1Bit = 1,
  // A sign bit and a magnitude bit each, LAYOUT_INDEX_2BIT: the 2-bit
  // quantization that sections 5.4 and 6 propose ("separating large movers
  // from small changes"). The magnitude boundary lies halfway between the
  // threshold and the largest kept |v|; each of the two buckets is
  // reconstructed as its mean |v| with the value's sign (the bucket rule of
  // the authors' implementation, marian-nmt's gradient dropper with bits=2).
  k2Bit = 2,
};

// The flag spelling of a DropSurvivors ("values", "1bit", "2bit").
constexpr const char* DropSurvivorsName(DropSurvivors survivors) {
  switch (survivors) {
    case DropSurvivors::kValues:
      return "values";
    case DropSurvivors::k1Bit:
      return "1bit";
    case DropSurvivors::k2Bit:
      return "2bit";
  }
  return "unknown";
}

// Where TernGrad clips a worker's gradient before ternarizing it with the
// shared scaler s_k = max_i s_ik (kernels/ternary_math.h, Ternarize).
enum class ClipRule : uint32_t {
  // At the worker's own bound s_ik = min(clip * sigma_i, max|g_i|) of the
  // chunk: p = min(|g|, s_ik) / s_k (Wen et al. 2017, Sec. 3.3: each worker
  // clips its own gradient at c * sigma_i).
  kWorker = 0,
  // At the shared scaler: p = min(|g|, s_k) / s_k, so a worker whose own
  // bound is below s_k is not clipped at it (tern before issue 18).
  kShared = 1,
};

// The flag spelling of a ClipRule ("worker", "shared").
constexpr const char* ClipRuleName(ClipRule rule) {
  return rule == ClipRule::kShared ? "shared" : "worker";
}

struct CodecOptions {
  CodecId id = CodecId::kTernGrad;
  // TernGrad: clipping at clip * sigma (0 disables clipping); whose sigma
  // clips is clip_rule, below.
  float clip = 2.5f;
  // kUnspecified picks the codec's default (TERNARY_2BIT / SUM_BITS for
  // TernGrad, RAW for fp32 and fp16, the one layout of the others).
  Layout push_layout = Layout::kUnspecified;
  Layout pull_layout = Layout::kUnspecified;

  // Sampled selection (adaptive, dropping) and sampled means (onebit): how
  // many elements of a chunk are drawn, with replacement, by the
  // counter-based RNG. A chunk with no more elements than this is used
  // whole, so small chunks are exact.
  uint32_t sample_size = 4096;
  // onebit: estimate each group's two means from a sample instead of from
  // every element.
  bool sampled_means = false;
  // threshold (Strom 2015): the fixed threshold tau; values are sent as
  // +-tau. Dryden et al. 2016 (section 4.4) used 0.001 on MNIST (Strom's
  // 4.0 sent nothing there).
  float tau = 0.001f;
  // adaptive (Dryden et al. 2016): the proportion of the non-negative and,
  // separately, of the negative updates that are sent. The paper writes it
  // as pi = 64 for "one in 64" (section 4), which is the default here.
  float proportion = 1.0f / 64;
  // dropping (Aji & Heafield 2017): the fraction R of updates dropped (the
  // smallest by absolute value), where the threshold comes from, and how
  // the survivors are sent.
  float drop_ratio = 0.99f;
  DropScope drop_scope = DropScope::kGlobal;
  DropSurvivors drop_survivors = DropSurvivors::kValues;
  // qsgd (Alistarh et al. 2017): s levels per sign and the bucket size.
  uint32_t qsgd_levels = 16;
  uint32_t qsgd_bucket = 512;
  // TernGrad: whose bound clips a gradient ternarized with the shared
  // scaler (last, so that positional initializers of the fields above stay
  // valid).
  ClipRule clip_rule = ClipRule::kWorker;
};

}  // namespace tern::kernels

#endif  // TERN_KERNELS_CODEC_OPTIONS_H_
