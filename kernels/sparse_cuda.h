// The sampled threshold selection and the sparse encoders on a CUDA device:
// the twins of SampledMagnitudeThreshold and SampledSignedThresholds
// (sparse_select.h) and of the dropping (Aji & Heafield 2017) and adaptive
// (Dryden et al. 2016) codecs' Encode, so that a worker whose gradients
// live on a GPU copies only the kept elements to the host. For the same
// values, options, stream and context every entry point gives the same
// bits as the CPU:
//
//   SampledMagnitudeThreshold  the same draws (Philox, multiply-shift) over
//                              the concatenation of the chunks, and the
//                              same order statistic (a radix select on the
//                              floats' bits; sparse_select_math.h says why
//                              it is the CPU's nth_element result);
//   SampledSignedThresholds    likewise, for both sign classes at once;
//   EncodeDropping/Adaptive    the CPU codec's payload, byte for byte: the
//                              kept elements in index order (an
//                              order-preserving compaction on the device)
//                              and, for INDEX_SIGN, each group's means
//                              summed in double in the CPU's order.
//
// Failures: the CPU codec's INVALID_ARGUMENT for bad options, a chunk too
// long, a non-finite value (naming its index) or a non-finite dropping
// threshold; INVALID_ARGUMENT naming the entry for a chunk table that does
// not fit its buffer (checked on the host before anything runs); an error
// of the CUDA runtime is a status naming the call (CudaStatus). Kernels
// never read or write outside the ranges they are given.
//
// Cost note: a group's means are one thread's sequential double sum (the
// only way to round like the CPU's loop), so one large group (group_size 0
// sends one group per chunk) is summed serially on the device.
//
// Only built with --config=cuda.
#ifndef TERN_KERNELS_SPARSE_CUDA_H_
#define TERN_KERNELS_SPARSE_CUDA_H_

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/philox.h"
#include "kernels/codec.h"
#include "kernels/cuda_context.h"
#include "kernels/codec_options.h"
#include "kernels/payload.h"
#include "kernels/sparse_cuda_plan.h"
#include "kernels/sparse_select.h"

namespace tern::kernels {

// The sparse kernels on one device, with their own stream and scratch
// memory (tables, sample keys, histograms, compaction buffers), which grow
// to the largest call and are reused.
//
// Every method enqueues its work on stream(), waits for it and returns the
// results on the host; device inputs written on another stream must be
// ready before the call. `values` pointers are device pointers.
//
// Not thread-safe: one caller at a time (a worker uses one per GPU).
// Methods make the context's device current on the calling thread.
class SparseCuda : public CudaContext {
 public:
  // A context on the calling thread's current device. UNAVAILABLE when
  // there is no usable device.
  static absl::StatusOr<std::unique_ptr<SparseCuda>> Create();

  ~SparseCuda();
  SparseCuda(const SparseCuda&) = delete;
  SparseCuda& operator=(const SparseCuda&) = delete;

  // SampledMagnitudeThreshold over the chunks of values[0, num_values), in
  // table order (the CPU's span of spans).
  absl::StatusOr<float> SampledMagnitudeThreshold(
      const float* values, uint64_t num_values,
      absl::Span<const CudaSparseChunk> chunks, float drop_ratio,
      uint32_t sample_size, const RandomStream& stream);

  // SampledSignedThresholds of values[0, count).
  absl::StatusOr<SignedThresholds> SampledSignedThresholds(
      const float* values, uint64_t count, float proportion,
      uint32_t sample_size, const RandomStream& stream);

  // The Encode of MakeDroppingCodec(options) (resp. MakeAdaptiveCodec) on
  // values[0, count) with `context`. Dropping with DropSurvivors::k2Bit is
  // UNIMPLEMENTED here (no INDEX_2BIT kernel yet): the CPU codec encodes it.
  absl::StatusOr<Payload> EncodeDropping(const float* values, uint64_t count,
                                         const CodecOptions& options,
                                         const EncodeContext& context);
  absl::StatusOr<Payload> EncodeAdaptive(const float* values, uint64_t count,
                                         const CodecOptions& options,
                                         const EncodeContext& context);

 private:
  // A selection to run on the device: the sample's table and rules.
  struct ThresholdJob {
    const float* values = nullptr;
    SampleTable table;
    uint32_t sample_size = 0;
    RandomStream stream;
    bool signed_keys = false;
    std::vector<sparse::RadixSelect> selects;
  };
  // What an encode keeps and how it is laid out.
  struct KeepJob {
    CodecId codec = CodecId::kUnspecified;
    Layout layout = Layout::kUnspecified;
    uint32_t group_size = 1;  // INDEX_SIGN
    // Where the thresholds come from: `fixed` (positive, negative), or the
    // selection `job` when it has selects.
    float fixed[2] = {0.0f, 0.0f};
    ThresholdJob job;
    // A non-finite dropping threshold: report it after the values' check,
    // as the CPU does.
    bool bad_threshold = false;
    float threshold = 0.0f;
  };

  explicit SparseCuda(Opened opened);

  // Enqueues the sample gather and the radix select of `job` (its selects
  // already on the device at `selects`), writing thresholds[0, 2).
  absl::Status EnqueueThresholds(const ThresholdJob& job,
                                 const sparse::SampleChunk* chunks,
                                 sparse::RadixSelect* selects,
                                 float* thresholds);
  // The selection of `selects` (all magnitude or all signed) over a
  // sample of the chunks of values[0, num_values).
  static absl::StatusOr<ThresholdJob> PlanJob(
      const float* values, absl::Span<const CudaSparseChunk> chunks,
      uint64_t num_values, uint32_t sample_size, const RandomStream& stream,
      std::vector<sparse::RadixSelect> selects);
  // Runs `job` alone and returns both thresholds.
  absl::StatusOr<std::pair<float, float>> RunThresholds(
      const ThresholdJob& job);
  // The encode pipeline: thresholds, compaction, means, payload.
  absl::StatusOr<Payload> Encode(const float* values, uint64_t count,
                                 const KeepJob& keep);

  DeviceScratch keys_;
  DeviceScratch histograms_;
  DeviceScratch tiles_;
  DeviceScratch out_;
  DeviceScratch kept_;
  DeviceScratch scalers_;
};

}  // namespace tern::kernels

#endif  // TERN_KERNELS_SPARSE_CUDA_H_
