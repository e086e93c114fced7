// The C++ side of the TernGrad CUDA kernels: chunk tables checked on the
// host, scratch memory owned by the context, CUDA errors turned into
// absl::Status naming the call. The kernels are in terngrad_gpu.cu and
// terngrad_sums_gpu.cu.
#include "kernels/terngrad_cuda.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/memory/memory.h"
#include "absl/status/status.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "kernels/terngrad_tile_cuda.h"

namespace tern::kernels {
namespace {

// The grid's x dimension holds at most 2^31 - 1 CTAs.
constexpr uint64_t kMaxCtas = std::numeric_limits<int32_t>::max();

// [offset, offset + count) inside [0, size), without overflow.
bool FitsIn(uint64_t offset, uint64_t count, uint64_t size) {
  return count <= size && offset <= size - count;
}

struct OutputRange {
  uint64_t begin;
  uint64_t end;
  size_t index;
};

// INVALID_ARGUMENT when two nonempty output ranges overlap (two chunks
// would write the same bytes from different threads).
absl::Status CheckDisjoint(std::vector<OutputRange> ranges,
                           absl::string_view what) {
  ranges.erase(
      std::remove_if(ranges.begin(), ranges.end(),
                     [](const OutputRange& r) { return r.begin == r.end; }),
      ranges.end());
  std::sort(ranges.begin(), ranges.end(),
            [](const OutputRange& a, const OutputRange& b) {
              return a.begin < b.begin;
            });
  for (size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i].begin < ranges[i - 1].end) {
      return absl::InvalidArgumentError(
          absl::StrFormat("chunk table entries %d and %d overlap in the %s",
                          ranges[i - 1].index, ranges[i].index, what));
    }
  }
  return absl::OkStatus();
}

// Gives chunk i ceil(counts[i] / per_cta) CTAs.
template <typename Entry>
absl::Status AssignCtas(const std::vector<uint64_t>& counts, uint64_t per_cta,
                        CudaLaunchTable<Entry>* table) {
  if (counts.size() > kMaxCtas) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "chunk table has %d entries, more than %d", counts.size(), kMaxCtas));
  }
  uint64_t total = 0;
  table->first_cta.reserve(counts.size());
  for (size_t i = 0; i < counts.size(); ++i) {
    table->first_cta.push_back(static_cast<uint32_t>(total));
    total += (counts[i] + per_cta - 1) / per_cta;
    if (total > kMaxCtas) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "chunk table needs more than %d CTAs by entry %d", kMaxCtas, i));
    }
  }
  table->num_ctas = static_cast<uint32_t>(total);
  return absl::OkStatus();
}

absl::Status CheckCount(size_t index, uint64_t count) {
  if (count > kMaxTernaryElements) {
    return absl::InvalidArgumentError(
        absl::StrFormat("chunk table entry %d has %d elements, more than %d",
                        index, count, kMaxTernaryElements));
  }
  return absl::OkStatus();
}

absl::Status OutOfRange(size_t index, absl::string_view what, uint64_t offset,
                        uint64_t count, uint64_t size) {
  return absl::InvalidArgumentError(absl::StrFormat(
      "chunk table entry %d: %s [%d, %d + %d) is outside the buffer of %d",
      index, what, offset, offset, count, size));
}

// "push 2, chunk 7: invalid code; nonzero padding" for the error bits.
std::string DescribeErrors(uint32_t bits) {
  std::vector<std::string> parts;
  if (bits & tile::kErrorBadValue) parts.push_back("a value out of range");
  if (bits & tile::kErrorBadPadding) parts.push_back("nonzero padding");
  return absl::StrJoin(parts, " and ");
}

}  // namespace

// ---------------------------------------------------------------------------
// Tables

absl::StatusOr<CudaLaunchTable<cuda::StatsChunk>> PlanCudaStats(
    absl::Span<const CudaStatsChunk> chunks, uint64_t num_values) {
  CudaLaunchTable<cuda::StatsChunk> table;
  std::vector<uint64_t> counts;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const CudaStatsChunk& chunk = chunks[i];
    if (!FitsIn(chunk.offset, chunk.count, num_values)) {
      return OutOfRange(i, "values", chunk.offset, chunk.count, num_values);
    }
    table.chunks.push_back(cuda::StatsChunk{chunk.offset, chunk.count});
    counts.push_back(chunk.count);
  }
  TERN_RETURN_IF_ERROR(AssignCtas(counts, cuda::kStatsElementsPerCta, &table));
  return table;
}

absl::StatusOr<CudaLaunchTable<cuda::QuantizeChunk>> PlanCudaQuantize(
    absl::Span<const CudaEncodeChunk> chunks, uint64_t num_values,
    Layout layout, uint64_t packed_size) {
  if (layout != Layout::kTernary2Bit && layout != Layout::kTernaryBase3) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "layout %s is not a ternary push layout", LayoutName(layout)));
  }
  CudaLaunchTable<cuda::QuantizeChunk> table;
  std::vector<uint64_t> counts;
  std::vector<OutputRange> outputs;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const CudaEncodeChunk& chunk = chunks[i];
    TERN_RETURN_IF_ERROR(CheckCount(i, chunk.count));
    if (!FitsIn(chunk.offset, chunk.count, num_values)) {
      return OutOfRange(i, "values", chunk.offset, chunk.count, num_values);
    }
    const uint64_t bytes = PackedTernaryBytes(chunk.count, layout);
    if (!FitsIn(chunk.packed_offset, bytes, packed_size)) {
      return OutOfRange(i, "payload bytes", chunk.packed_offset, bytes,
                        packed_size);
    }
    table.chunks.push_back(cuda::QuantizeChunk{
        chunk.offset, chunk.count, chunk.packed_offset, chunk.scaler,
        ClipBound(chunk.clip_bound, chunk.scaler), chunk.key});
    counts.push_back(chunk.count);
    outputs.push_back(
        OutputRange{chunk.packed_offset, chunk.packed_offset + bytes, i});
  }
  TERN_RETURN_IF_ERROR(CheckDisjoint(std::move(outputs), "packed output"));
  TERN_RETURN_IF_ERROR(
      AssignCtas(counts, cuda::TernaryElementsPerCta(layout), &table));
  return table;
}

absl::StatusOr<CudaLaunchTable<cuda::SumChunk>> PlanCudaSumPushes(
    absl::Span<const CudaSumChunk> chunks, uint64_t push_size, Layout layout,
    uint64_t num_sums) {
  if (layout != Layout::kTernary2Bit && layout != Layout::kTernaryBase3) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "layout %s is not a ternary push layout", LayoutName(layout)));
  }
  CudaLaunchTable<cuda::SumChunk> table;
  std::vector<uint64_t> counts;
  std::vector<OutputRange> outputs;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const CudaSumChunk& chunk = chunks[i];
    TERN_RETURN_IF_ERROR(CheckCount(i, chunk.count));
    const uint64_t bytes = PackedTernaryBytes(chunk.count, layout);
    if (!FitsIn(chunk.packed_offset, bytes, push_size)) {
      return OutOfRange(i, "push bytes", chunk.packed_offset, bytes, push_size);
    }
    if (!FitsIn(chunk.offset, chunk.count, num_sums)) {
      return OutOfRange(i, "sums", chunk.offset, chunk.count, num_sums);
    }
    table.chunks.push_back(cuda::SumChunk{chunk.packed_offset, chunk.count,
                                          chunk.offset, chunk.scaler});
    counts.push_back(chunk.count);
    outputs.push_back(OutputRange{chunk.offset, chunk.offset + chunk.count, i});
  }
  TERN_RETURN_IF_ERROR(CheckDisjoint(std::move(outputs), "sums"));
  TERN_RETURN_IF_ERROR(
      AssignCtas(counts, cuda::TernaryElementsPerCta(layout), &table));
  return table;
}

absl::StatusOr<CudaLaunchTable<cuda::SumChunk>> PlanCudaDecodeSums(
    absl::Span<const CudaSumChunk> chunks, uint64_t packed_size,
    uint32_t num_summands, Layout layout, uint64_t num_out) {
  if (layout != Layout::kSumBits && layout != Layout::kSumRadix) {
    return absl::InvalidArgumentError(
        absl::StrFormat("layout %s is not a sum layout", LayoutName(layout)));
  }
  if (SumBits(num_summands) == 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d summands, want 1 to %d", num_summands, kMaxSummands));
  }
  CudaLaunchTable<cuda::SumChunk> table;
  std::vector<uint64_t> counts;
  std::vector<OutputRange> outputs;
  for (size_t i = 0; i < chunks.size(); ++i) {
    const CudaSumChunk& chunk = chunks[i];
    TERN_RETURN_IF_ERROR(CheckCount(i, chunk.count));
    const uint64_t bytes = PackedSumBytes(chunk.count, num_summands, layout);
    if (!FitsIn(chunk.packed_offset, bytes, packed_size)) {
      return OutOfRange(i, "pull bytes", chunk.packed_offset, bytes,
                        packed_size);
    }
    if (!FitsIn(chunk.offset, chunk.count, num_out)) {
      return OutOfRange(i, "output", chunk.offset, chunk.count, num_out);
    }
    table.chunks.push_back(cuda::SumChunk{chunk.packed_offset, chunk.count,
                                          chunk.offset, chunk.scaler});
    counts.push_back(chunk.count);
    outputs.push_back(OutputRange{chunk.offset, chunk.offset + chunk.count, i});
  }
  TERN_RETURN_IF_ERROR(CheckDisjoint(std::move(outputs), "output"));
  TERN_RETURN_IF_ERROR(AssignCtas(
      counts,
      cuda::DecodeElementsPerCta(layout, SumRadixDigitsPerWord(num_summands)),
      &table));
  return table;
}

// ---------------------------------------------------------------------------
// Context

absl::StatusOr<std::unique_ptr<TernGradCuda>> TernGradCuda::Create() {
  TERN_ASSIGN_OR_RETURN(const Opened opened, Open());
  return absl::WrapUnique(new TernGradCuda(opened));
}

TernGradCuda::TernGradCuda(Opened opened) : CudaContext(opened) {}

// The members free their memory and the stream; nothing is left in flight
// because every method waits for its work.
TernGradCuda::~TernGradCuda() = default;

absl::StatusOr<uint32_t*> TernGradCuda::ClearErrors(size_t num_words) {
  TERN_RETURN_IF_ERROR(
      Reserve(&errors_, num_words * sizeof(uint32_t), /*zeroed=*/false));
  auto* errors = static_cast<uint32_t*>(errors_.data.get());
  TERN_RETURN_IF_ERROR(CudaStatus(
      cudaMemsetAsync(errors, 0, num_words * sizeof(uint32_t), stream_),
      "cudaMemsetAsync (error words)"));
  return errors;
}

absl::StatusOr<std::vector<uint32_t>> TernGradCuda::FetchErrors(
    size_t num_words) {
  std::vector<uint32_t> errors(num_words);
  TERN_RETURN_IF_ERROR(
      CudaStatus(cudaMemcpyAsync(errors.data(), errors_.data.get(),
                                 num_words * sizeof(uint32_t),
                                 cudaMemcpyDeviceToHost, stream_),
                 "cudaMemcpyAsync (error words)"));
  TERN_RETURN_IF_ERROR(Synchronize());
  return errors;
}


absl::StatusOr<std::vector<ChunkStats>> TernGradCuda::ComputeStats(
    const float* values, uint64_t num_values,
    absl::Span<const CudaStatsChunk> chunks) {
  TERN_ASSIGN_OR_RETURN(CudaLaunchTable<cuda::StatsChunk> table,
                        PlanCudaStats(chunks, num_values));
  // Empty chunks own no CTA: their statistics are ComputeStats({}).
  std::vector<ChunkStats> stats(chunks.size());
  if (table.num_ctas == 0) return stats;
  TERN_RETURN_IF_ERROR(Activate());
  const size_t num_chunks = table.chunks.size();
  TERN_ASSIGN_OR_RETURN(
      std::vector<void*> tables,
      UploadTables(
          {{table.chunks.data(), num_chunks * sizeof(cuda::StatsChunk)},
           {table.first_cta.data(), num_chunks * sizeof(uint32_t)}}));
  TERN_RETURN_IF_ERROR(
      Reserve(&partials_, table.num_ctas * sizeof(tile::StatsNode), false));
  TERN_RETURN_IF_ERROR(
      Reserve(&counters_, num_chunks * sizeof(uint32_t), /*zeroed=*/true));
  const size_t result_bytes = num_chunks * sizeof(cuda::StatsResult);
  TERN_RETURN_IF_ERROR(Reserve(&results_, result_bytes, false));
  TERN_RETURN_IF_ERROR(CudaStatus(
      cuda::LaunchChunkStats(
          values, static_cast<const cuda::StatsChunk*>(tables[0]),
          static_cast<const uint32_t*>(tables[1]),
          static_cast<uint32_t>(num_chunks), table.num_ctas,
          static_cast<tile::StatsNode*>(partials_.data.get()),
          static_cast<uint32_t*>(counters_.data.get()),
          static_cast<cuda::StatsResult*>(results_.data.get()), stream_),
      "ChunkStats kernel launch"));
  std::vector<cuda::StatsResult> results(num_chunks);
  TERN_RETURN_IF_ERROR(
      CudaStatus(cudaMemcpyAsync(results.data(), results_.data.get(),
                                 result_bytes, cudaMemcpyDeviceToHost, stream_),
                 "cudaMemcpyAsync (chunk statistics)"));
  TERN_RETURN_IF_ERROR(Synchronize());
  for (size_t i = 0; i < num_chunks; ++i) {
    if (chunks[i].count == 0) continue;
    const cuda::StatsResult& result = results[i];
    ChunkStats& out = stats[i];
    out.nonfinite = result.node.nonfinite;
    out.count = chunks[i].count - result.node.nonfinite;
    out.shift = result.shift;
    out.shifted_sum = result.node.sum;
    out.shifted_sum_squares = result.node.sum_squares;
    out.max_abs = result.node.max_abs;
  }
  return stats;
}

absl::Status TernGradCuda::QuantizePack(
    const float* values, uint64_t num_values,
    absl::Span<const CudaEncodeChunk> chunks, const RandomStream& stream,
    Layout layout, uint8_t* packed, uint64_t packed_size) {
  TERN_ASSIGN_OR_RETURN(
      CudaLaunchTable<cuda::QuantizeChunk> table,
      PlanCudaQuantize(chunks, num_values, layout, packed_size));
  if (table.num_ctas == 0) return absl::OkStatus();
  TERN_RETURN_IF_ERROR(Activate());
  const size_t num_chunks = table.chunks.size();
  TERN_ASSIGN_OR_RETURN(
      std::vector<void*> tables,
      UploadTables(
          {{table.chunks.data(), num_chunks * sizeof(cuda::QuantizeChunk)},
           {table.first_cta.data(), num_chunks * sizeof(uint32_t)}}));
  TERN_RETURN_IF_ERROR(CudaStatus(
      cuda::LaunchQuantizePack(
          values, static_cast<const cuda::QuantizeChunk*>(tables[0]),
          static_cast<const uint32_t*>(tables[1]),
          static_cast<uint32_t>(num_chunks), table.num_ctas, stream.seed,
          stream.step, stream.worker, layout, packed, stream_),
      "QuantizePack kernel launch"));
  return Synchronize();
}

absl::Status TernGradCuda::SumTernaryPushes(
    absl::Span<const uint8_t* const> pushes, uint64_t push_size,
    absl::Span<const CudaSumChunk> chunks, Layout layout, int32_t* sums,
    uint64_t num_sums) {
  TERN_ASSIGN_OR_RETURN(CudaLaunchTable<cuda::SumChunk> table,
                        PlanCudaSumPushes(chunks, push_size, layout, num_sums));
  if (pushes.empty() || pushes.size() > kMaxSummands) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%d pushes, want 1 to %d", pushes.size(), kMaxSummands));
  }
  if (table.num_ctas == 0) return absl::OkStatus();
  TERN_RETURN_IF_ERROR(Activate());
  const size_t num_chunks = table.chunks.size();
  TERN_ASSIGN_OR_RETURN(
      std::vector<void*> tables,
      UploadTables({{table.chunks.data(), num_chunks * sizeof(cuda::SumChunk)},
                    {table.first_cta.data(), num_chunks * sizeof(uint32_t)},
                    {pushes.data(), pushes.size() * sizeof(const uint8_t*)}}));
  const size_t num_errors = pushes.size() * num_chunks;
  TERN_ASSIGN_OR_RETURN(uint32_t * errors, ClearErrors(num_errors));
  TERN_RETURN_IF_ERROR(CudaStatus(
      cuda::LaunchSumTernary(static_cast<const uint8_t* const*>(tables[2]),
                             static_cast<uint32_t>(pushes.size()),
                             static_cast<const cuda::SumChunk*>(tables[0]),
                             static_cast<const uint32_t*>(tables[1]),
                             static_cast<uint32_t>(num_chunks), table.num_ctas,
                             layout, sums, errors, stream_),
      "SumTernary kernel launch"));
  TERN_ASSIGN_OR_RETURN(std::vector<uint32_t> flags, FetchErrors(num_errors));
  for (size_t w = 0; w < pushes.size(); ++w) {
    for (size_t c = 0; c < num_chunks; ++c) {
      const uint32_t bits = flags[w * num_chunks + c];
      if (bits != 0) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "%s push %d of chunk %d (table entry %d): %s", LayoutName(layout),
            w, chunks[c].key, c, DescribeErrors(bits)));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status TernGradCuda::DecodeSums(const uint8_t* packed,
                                      uint64_t packed_size,
                                      absl::Span<const CudaSumChunk> chunks,
                                      uint32_t num_summands, Layout layout,
                                      float* out, uint64_t num_out) {
  TERN_ASSIGN_OR_RETURN(
      CudaLaunchTable<cuda::SumChunk> table,
      PlanCudaDecodeSums(chunks, packed_size, num_summands, layout, num_out));
  if (table.num_ctas == 0) return absl::OkStatus();
  TERN_RETURN_IF_ERROR(Activate());
  const size_t num_chunks = table.chunks.size();
  TERN_ASSIGN_OR_RETURN(
      std::vector<void*> tables,
      UploadTables({{table.chunks.data(), num_chunks * sizeof(cuda::SumChunk)},
                    {table.first_cta.data(), num_chunks * sizeof(uint32_t)}}));
  TERN_ASSIGN_OR_RETURN(uint32_t * errors, ClearErrors(num_chunks));
  TERN_RETURN_IF_ERROR(CudaStatus(
      cuda::LaunchDecodeSums(packed,
                             static_cast<const cuda::SumChunk*>(tables[0]),
                             static_cast<const uint32_t*>(tables[1]),
                             static_cast<uint32_t>(num_chunks), table.num_ctas,
                             num_summands, layout, out, errors, stream_),
      "DecodeSums kernel launch"));
  TERN_ASSIGN_OR_RETURN(std::vector<uint32_t> flags, FetchErrors(num_chunks));
  for (size_t c = 0; c < num_chunks; ++c) {
    if (flags[c] != 0) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "%s pull of chunk %d (table entry %d) with %d summands: %s",
          LayoutName(layout), chunks[c].key, c, num_summands,
          DescribeErrors(flags[c])));
    }
  }
  return absl::OkStatus();
}

}  // namespace tern::kernels
