// The sampling table: nonempty chunks in order with their positions in the
// concatenation, and entries outside the buffer rejected before any launch.
#include "kernels/sparse_cuda_plan.h"

#include <cstdint>
#include <limits>

#include "absl/status/status.h"
#include "gtest/gtest.h"

namespace tern::kernels {
namespace {

TEST(PlanSampleTable, KeepsNonemptyChunksInTableOrder) {
  const CudaSparseChunk chunks[] = {{7, 2}, {0, 0}, {1, 5}, {9, 0}, {0, 1}};
  const absl::StatusOr<SampleTable> table = PlanSampleTable(chunks, 9);
  ASSERT_TRUE(table.ok()) << table.status();
  EXPECT_EQ(table->total, 8u);
  ASSERT_EQ(table->chunks.size(), 3u);
  EXPECT_EQ(table->chunks[0].first, 0u);
  EXPECT_EQ(table->chunks[0].offset, 7u);
  EXPECT_EQ(table->chunks[1].first, 2u);
  EXPECT_EQ(table->chunks[1].offset, 1u);
  EXPECT_EQ(table->chunks[2].first, 7u);
  EXPECT_EQ(table->chunks[2].offset, 0u);
}

TEST(PlanSampleTable, EmptyTablesHaveNoValues) {
  const absl::StatusOr<SampleTable> none = PlanSampleTable({}, 0);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->total, 0u);
  const CudaSparseChunk empty[] = {{3, 0}};
  const absl::StatusOr<SampleTable> table = PlanSampleTable(empty, 3);
  ASSERT_TRUE(table.ok());
  EXPECT_TRUE(table->chunks.empty());
}

TEST(PlanSampleTable, RejectsChunksOutsideTheBufferNamingTheEntry) {
  const CudaSparseChunk past_end[] = {{0, 1}, {5, 6}};
  const absl::Status status = PlanSampleTable(past_end, 10).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("entry 1"), absl::string_view::npos)
      << status;
  const CudaSparseChunk empty_past_end[] = {{11, 0}};
  EXPECT_EQ(PlanSampleTable(empty_past_end, 10).status().code(),
            absl::StatusCode::kInvalidArgument);
  const CudaSparseChunk wraps[] = {{std::numeric_limits<uint64_t>::max(), 2}};
  EXPECT_EQ(PlanSampleTable(wraps, 20).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PlanSampleTable, RejectsTotalsPast64Bits) {
  const uint64_t huge = std::numeric_limits<uint64_t>::max() / 2 + 1;
  const CudaSparseChunk chunks[] = {{0, huge}, {0, huge}};
  const absl::Status status = PlanSampleTable(chunks, huge).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("entry 1"), absl::string_view::npos)
      << status;
}

}  // namespace
}  // namespace tern::kernels
