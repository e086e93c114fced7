// The C++ side of the sparse CUDA kernels: options and tables checked on
// the host as the CPU codecs check them, scratch memory owned by the
// context, payloads assembled from the kept elements, CUDA errors turned
// into absl::Status naming the call. The kernels are in sparse_gpu.cu.
#include "kernels/sparse_cuda.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/memory/memory.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "kernels/adaptive_codec.h"
#include "kernels/dropping_codec.h"
#include "kernels/index_packing.h"
#include "kernels/sparse_cuda_launch.h"
#include "kernels/sparse_select_math.h"
#include "kernels/cuda_context.h"

namespace tern::kernels {
namespace {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the sparse layouts are little-endian, and so are the words "
              "the device writes; these copies assume the host is too");

constexpr unsigned long long kNoIndex = ~0ull;

// The thresholds of selections that found no value (the CPU's "sample
// empty" and "class absent" results); the kernels overwrite them.
void EmptyThresholds(absl::Span<const sparse::RadixSelect> selects,
                     float* thresholds) {
  for (const sparse::RadixSelect& select : selects) {
    sparse::StoreThreshold(select, thresholds);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<SparseCuda>> SparseCuda::Create() {
  TERN_ASSIGN_OR_RETURN(const Opened opened, Open());
  return absl::WrapUnique(new SparseCuda(opened));
}

SparseCuda::SparseCuda(Opened opened) : CudaContext(opened) {}

// Every method waits for its work, so nothing is in flight here.
SparseCuda::~SparseCuda() = default;

absl::Status SparseCuda::EnqueueThresholds(const ThresholdJob& job,
                                           const sparse::SampleChunk* chunks,
                                           sparse::RadixSelect* selects,
                                           float* thresholds) {
  const uint64_t total = job.table.total;
  const uint32_t num_keys = sparse::SampleSlots(total, job.sample_size);
  // Nothing to draw: the thresholds stay the empty selections' values.
  if (num_keys == 0) return absl::OkStatus();
  const auto num_selects = static_cast<uint32_t>(job.selects.size());
  TERN_RETURN_IF_ERROR(Reserve(&keys_, size_t{num_keys} * sizeof(uint32_t)));
  uint32_t* histograms = nullptr;
  if (num_keys > cuda::kSingleCtaSelectKeys) {
    const size_t bytes =
        cuda::RadixHistogramWords(num_selects) * sizeof(uint32_t);
    TERN_RETURN_IF_ERROR(Reserve(&histograms_, bytes));
    histograms = static_cast<uint32_t*>(histograms_.data.get());
    TERN_RETURN_IF_ERROR(
        CudaStatus(cudaMemsetAsync(histograms, 0, bytes, stream_),
                   "cudaMemsetAsync (radix histograms)"));
  }
  auto* keys = static_cast<uint32_t*>(keys_.data.get());
  TERN_RETURN_IF_ERROR(CudaStatus(
      cuda::LaunchGatherSample(
          job.values, chunks, static_cast<uint32_t>(job.table.chunks.size()),
          total, num_keys, sparse::SampleIsDrawn(total, job.sample_size),
          job.stream, job.signed_keys, keys, stream_),
      "GatherSample kernel launch"));
  return CudaStatus(
      cuda::LaunchRadixSelect(keys, num_keys, selects, num_selects,
                              histograms, thresholds, stream_),
      "RadixSelect kernel launch");
}

absl::StatusOr<std::pair<float, float>> SparseCuda::RunThresholds(
    const ThresholdJob& job) {
  float thresholds[2] = {0.0f, 0.0f};
  EmptyThresholds(job.selects, thresholds);
  if (sparse::SampleSlots(job.table.total, job.sample_size) == 0) {
    return std::make_pair(thresholds[0], thresholds[1]);
  }
  TERN_RETURN_IF_ERROR(Activate());
  TERN_ASSIGN_OR_RETURN(
      std::vector<void*> tables,
      UploadTables(
          {{job.table.chunks.data(),
            job.table.chunks.size() * sizeof(sparse::SampleChunk)},
           {job.selects.data(),
            job.selects.size() * sizeof(sparse::RadixSelect)},
           {thresholds, sizeof(thresholds)}}));
  auto* device_thresholds = static_cast<float*>(tables[2]);
  TERN_RETURN_IF_ERROR(EnqueueThresholds(
      job, static_cast<const sparse::SampleChunk*>(tables[0]),
      static_cast<sparse::RadixSelect*>(tables[1]), device_thresholds));
  TERN_RETURN_IF_ERROR(CudaStatus(
      cudaMemcpyAsync(thresholds, device_thresholds, sizeof(thresholds),
                      cudaMemcpyDeviceToHost, stream_),
      "cudaMemcpyAsync (thresholds)"));
  TERN_RETURN_IF_ERROR(Synchronize());
  return std::make_pair(thresholds[0], thresholds[1]);
}

absl::StatusOr<SparseCuda::ThresholdJob> SparseCuda::PlanJob(
    const float* values, absl::Span<const CudaSparseChunk> chunks,
    uint64_t num_values, uint32_t sample_size, const RandomStream& stream,
    std::vector<sparse::RadixSelect> selects) {
  ThresholdJob job;
  TERN_ASSIGN_OR_RETURN(job.table, PlanSampleTable(chunks, num_values));
  job.values = values;
  job.sample_size = sample_size;
  job.stream = stream;
  // Signed selections sort the values themselves, magnitude ones |v|.
  job.signed_keys = selects.front().rule !=
                    static_cast<uint32_t>(sparse::SelectRule::kMagnitude);
  job.selects = std::move(selects);
  return job;
}

absl::StatusOr<float> SparseCuda::SampledMagnitudeThreshold(
    const float* values, uint64_t num_values,
    absl::Span<const CudaSparseChunk> chunks, float drop_ratio,
    uint32_t sample_size, const RandomStream& stream) {
  TERN_ASSIGN_OR_RETURN(
      const ThresholdJob job,
      PlanJob(values, chunks, num_values, sample_size, stream,
              {sparse::StartSelect(sparse::SelectRule::kMagnitude,
                                   drop_ratio)}));
  TERN_ASSIGN_OR_RETURN(auto thresholds, RunThresholds(job));
  return thresholds.first;
}

absl::StatusOr<SignedThresholds> SparseCuda::SampledSignedThresholds(
    const float* values, uint64_t count, float proportion,
    uint32_t sample_size, const RandomStream& stream) {
  const CudaSparseChunk whole[] = {{0, count}};
  TERN_ASSIGN_OR_RETURN(
      const ThresholdJob job,
      PlanJob(values, whole, count, sample_size, stream,
              {sparse::StartSelect(sparse::SelectRule::kPositive, proportion),
               sparse::StartSelect(sparse::SelectRule::kNegative,
                                   proportion)}));
  TERN_ASSIGN_OR_RETURN(auto thresholds, RunThresholds(job));
  SignedThresholds result;
  result.positive = thresholds.first;
  result.negative = thresholds.second;
  return result;
}

absl::StatusOr<Payload> SparseCuda::EncodeDropping(
    const float* values, uint64_t count, const CodecOptions& options,
    const EncodeContext& context) {
  TERN_RETURN_IF_ERROR(MakeDroppingCodec(options).status());
  if (options.drop_survivors == DropSurvivors::k2Bit) {
    // The kernels write INDEX_SIGN and INDEX_VALUE only; the CPU codec
    // (kernels/dropping_codec.h) encodes INDEX_2BIT.
    return absl::UnimplementedError(
        "dropping with 2-bit survivors (INDEX_2BIT) has no GPU encoder; "
        "encode it with the CPU codec");
  }
  KeepJob keep;
  keep.codec = CodecId::kDropping;
  if (options.drop_survivors == DropSurvivors::k1Bit) {
    keep.layout = Layout::kIndexSign;
    keep.group_size = SparseGroupSize(0, count);  // one group
  } else {
    keep.layout = Layout::kIndexValue;
  }
  const float threshold = context.threshold;
  if (!std::isfinite(threshold)) {
    keep.bad_threshold = true;
    keep.threshold = threshold;
  } else if (options.drop_scope == DropScope::kGlobal && threshold > 0.0f) {
    keep.fixed[0] = threshold;
    keep.fixed[1] = -threshold;
  } else {
    const CudaSparseChunk whole[] = {{0, count}};
    TERN_ASSIGN_OR_RETURN(
        keep.job, PlanJob(values, whole, count, options.sample_size,
                          context.stream,
                          {sparse::StartSelect(sparse::SelectRule::kMagnitude,
                                               options.drop_ratio)}));
  }
  return Encode(values, count, keep);
}

absl::StatusOr<Payload> SparseCuda::EncodeAdaptive(
    const float* values, uint64_t count, const CodecOptions& options,
    const EncodeContext& context) {
  TERN_RETURN_IF_ERROR(MakeAdaptiveCodec(options).status());
  KeepJob keep;
  keep.codec = CodecId::kAdaptive;
  keep.layout = Layout::kIndexSign;
  keep.group_size = SparseGroupSize(context.group_size, count);
  const CudaSparseChunk whole[] = {{0, count}};
  TERN_ASSIGN_OR_RETURN(
      keep.job,
      PlanJob(values, whole, count, options.sample_size, context.stream,
              {sparse::StartSelect(sparse::SelectRule::kPositive,
                                   options.proportion),
               sparse::StartSelect(sparse::SelectRule::kNegative,
                                   options.proportion)}));
  return Encode(values, count, keep);
}

absl::StatusOr<Payload> SparseCuda::Encode(const float* values, uint64_t n,
                                           const KeepJob& keep) {
  const char* name = CodecName(keep.codec);
  // The CPU's CheckSparseInput, then its threshold check, in that order.
  if (n >= kMaxSparseElements) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s chunk of %d values is too long: indices have 31 bits, so a chunk "
        "must have fewer than %d",
        name, n, kMaxSparseElements));
  }
  const bool index_sign = keep.layout == Layout::kIndexSign;
  Payload payload;
  payload.codec = keep.codec;
  payload.layout = keep.layout;
  payload.num_elements = n;
  payload.num_summands = 1;
  const uint64_t groups = index_sign ? NumGroups(n, keep.group_size) : 0;

  cuda::SparseSummary summary{kNoIndex, 0};
  if (n > 0) {
    TERN_RETURN_IF_ERROR(Activate());
    // All scratch before the first launch of the call.
    const uint64_t tiles = cuda::SparseTiles(n);
    TERN_RETURN_IF_ERROR(Reserve(&tiles_, 2 * tiles * sizeof(uint32_t)));
    TERN_RETURN_IF_ERROR(
        Reserve(&out_, (index_sign ? 1 : 2) * n * sizeof(uint32_t)));
    if (index_sign) {
      TERN_RETURN_IF_ERROR(Reserve(&kept_, n * sizeof(float)));
      TERN_RETURN_IF_ERROR(Reserve(&scalers_, 2 * groups * sizeof(float)));
    }
    const bool selecting = !keep.bad_threshold && !keep.job.selects.empty();
    float thresholds[2] = {keep.fixed[0], keep.fixed[1]};
    if (selecting) EmptyThresholds(keep.job.selects, thresholds);
    TERN_ASSIGN_OR_RETURN(
        std::vector<void*> tables,
        UploadTables(
            {{keep.job.table.chunks.data(),
              keep.job.table.chunks.size() * sizeof(sparse::SampleChunk)},
             {keep.job.selects.data(),
              keep.job.selects.size() * sizeof(sparse::RadixSelect)},
             {thresholds, sizeof(thresholds)},
             {&summary, sizeof(summary)}}));
    auto* device_thresholds = static_cast<float*>(tables[2]);
    auto* device_summary = static_cast<cuda::SparseSummary*>(tables[3]);
    if (selecting) {
      TERN_RETURN_IF_ERROR(EnqueueThresholds(
          keep.job, static_cast<const sparse::SampleChunk*>(tables[0]),
          static_cast<sparse::RadixSelect*>(tables[1]), device_thresholds));
    }

    auto* tile_counts = static_cast<uint32_t*>(tiles_.data.get());
    auto* out = static_cast<uint32_t*>(out_.data.get());
    auto* kept = static_cast<float*>(kept_.data.get());
    auto* scalers = static_cast<float*>(scalers_.data.get());
    TERN_RETURN_IF_ERROR(CudaStatus(
        cuda::LaunchKeep(values, n, device_thresholds, tile_counts,
                         tile_counts + tiles, device_summary, !index_sign, out,
                         kept, stream_),
        "Keep kernel launch"));
    if (index_sign) {
      TERN_RETURN_IF_ERROR(CudaStatus(
          cuda::LaunchGroupMeans(out, kept, device_summary, n,
                                 keep.group_size, scalers, stream_),
          "GroupMeans kernel launch"));
    }
    TERN_RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(&summary, device_summary, sizeof(summary),
                        cudaMemcpyDeviceToHost, stream_),
        "cudaMemcpyAsync (summary)"));
    TERN_RETURN_IF_ERROR(Synchronize());

    if (summary.first_nonfinite != kNoIndex) {
      float value = 0.0f;
      TERN_RETURN_IF_ERROR(CudaStatus(
          cudaMemcpy(&value, values + summary.first_nonfinite, sizeof(value),
                     cudaMemcpyDeviceToHost),
          "cudaMemcpy (non-finite value)"));
      return absl::InvalidArgumentError(
          absl::StrFormat("%s chunk value %d is %g, want a finite value", name,
                          summary.first_nonfinite, value));
    }
  }
  if (keep.bad_threshold) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "dropping threshold %g is not finite", keep.threshold));
  }

  // The payload: only the kept elements (and the scalers) come back.
  const uint64_t kept_count = summary.kept;
  if (index_sign) {
    payload.data.resize(4 + 4 * kept_count);
    std::memcpy(&payload.data[0], &keep.group_size, 4);
    payload.scalers.resize(2 * groups);
  } else {
    payload.data.resize(8 * kept_count);
  }
  if (kept_count > 0) {
    TERN_RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(&payload.data[index_sign ? 4 : 0], out_.data.get(),
                        payload.data.size() - (index_sign ? 4 : 0),
                        cudaMemcpyDeviceToHost, stream_),
        "cudaMemcpyAsync (kept elements)"));
  }
  if (groups > 0) {
    TERN_RETURN_IF_ERROR(CudaStatus(
        cudaMemcpyAsync(payload.scalers.data(), scalers_.data.get(),
                        payload.scalers.size() * sizeof(float),
                        cudaMemcpyDeviceToHost, stream_),
        "cudaMemcpyAsync (scalers)"));
  }
  TERN_RETURN_IF_ERROR(Synchronize());
  return payload;
}

}  // namespace tern::kernels
