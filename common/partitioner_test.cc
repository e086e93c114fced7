#include "common/partitioner.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace tern {
namespace {

// LeNet of the TernGrad paper: conv 5x5x32, conv 5x5x64, fc 1024, fc 10.
const std::vector<uint64_t> kLeNet = {800,     32,   51200, 64,
                                      3211264, 1024, 10240, 10};

TEST(PartitionerTest, TensorsBelowTheBoundAreOneChunkEach) {
  auto partition = Partition::Create(kLeNet, 16 << 20, 2);
  ASSERT_TRUE(partition.ok()) << partition.status();
  ASSERT_EQ(partition->chunks().size(), kLeNet.size());
  for (uint32_t t = 0; t < kLeNet.size(); ++t) {
    EXPECT_EQ(partition->chunks()[t].key, t);
    EXPECT_EQ(partition->chunks()[t].tensor, t);
    EXPECT_EQ(partition->chunks()[t].num_elements, kLeNet[t]);
  }
}

TEST(PartitionerTest, LeNetFc1IsCutAtTheDefaultBound) {
  // fc1 has 3136 x 1024 floats = 12.25 MiB: four chunks under 4 MiB.
  auto partition = Partition::Create(kLeNet, kDefaultPartitionBytes, 2);
  ASSERT_TRUE(partition.ok());
  EXPECT_EQ(partition->chunks().size(), kLeNet.size() + 3);
  EXPECT_EQ(partition->chunks()[4].num_elements, 3211264u / 4);
}

TEST(PartitionerTest, LargeTensorIsCutIntoBalancedChunks) {
  // 10 elements at 3 per chunk: 4 chunks of 3, 3, 2, 2.
  auto partition = Partition::Create({10}, 3 * sizeof(float), 1);
  ASSERT_TRUE(partition.ok());
  std::vector<uint64_t> sizes;
  for (const Chunk& c : partition->chunks()) sizes.push_back(c.num_elements);
  EXPECT_EQ(sizes, (std::vector<uint64_t>{3, 3, 2, 2}));
  EXPECT_EQ(partition->chunks()[2].offset, 6u);
}

constexpr ShardAssignment kRules[] = {ShardAssignment::kBalanced,
                                      ShardAssignment::kBackwardOrder,
                                      ShardAssignment::kEven};

TEST(PartitionerTest, ChunksTileEveryTensorExactly) {
  for (const ShardAssignment rule : kRules) {
    for (uint64_t bytes : {4ull, 12ull, 4096ull, 1ull << 20}) {
      SCOPED_TRACE(ShardAssignmentName(rule));
      auto partition = Partition::Create(kLeNet, bytes, 3, rule);
      ASSERT_TRUE(partition.ok());
      uint64_t flat = 0;
      uint32_t tensor = 0;
      uint64_t offset = 0;
      for (const Chunk& c : partition->chunks()) {
        if (c.tensor != tensor) {
          EXPECT_EQ(offset, kLeNet[tensor]) << "tensor " << tensor;
          tensor = c.tensor;
          offset = 0;
        }
        EXPECT_EQ(c.offset, offset);
        EXPECT_EQ(c.flat_offset, flat);
        EXPECT_LE(c.num_elements, bytes / 4);
        offset += c.num_elements;
        flat += c.num_elements;
      }
      EXPECT_EQ(flat, partition->total_elements());
    }
  }
}

TEST(PartitionerTest, ShardsAreBalancedAndDeterministic) {
  auto a = Partition::Create(kLeNet, 64 << 10, 4);
  auto b = Partition::Create(kLeNet, 64 << 10, 4);
  ASSERT_TRUE(a.ok() && b.ok());
  uint64_t largest_chunk = 0;
  for (size_t i = 0; i < a->chunks().size(); ++i) {
    EXPECT_EQ(a->chunks()[i].shard, b->chunks()[i].shard);
    largest_chunk = std::max(largest_chunk, a->chunks()[i].num_elements);
  }
  uint64_t lo = UINT64_MAX, hi = 0, total = 0;
  for (uint32_t s = 0; s < 4; ++s) {
    const uint64_t n = a->ShardElements(s);
    lo = std::min(lo, n);
    hi = std::max(hi, n);
    total += n;
    for (uint32_t key : a->ChunksOfShard(s))
      EXPECT_EQ(a->chunks()[key].shard, s);
  }
  EXPECT_EQ(total, a->total_elements());
  // LPT keeps shards within one chunk of each other.
  EXPECT_LE(hi - lo, largest_chunk);
}

TEST(PartitionerTest, LargestChunkGoesToShardZeroFirst) {
  auto partition = Partition::Create({5, 100, 7}, kDefaultPartitionBytes, 2);
  ASSERT_TRUE(partition.ok());
  EXPECT_EQ(partition->chunks()[1].shard, 0u);  // 100 elements
  EXPECT_EQ(partition->chunks()[2].shard, 1u);  // 7
  EXPECT_EQ(partition->chunks()[0].shard, 1u);  // 5 joins the lighter shard
}

TEST(PartitionerTest, BackwardOrderPutsTheLastLayersOnShardZero) {
  // fc1's four chunks (keys 4..7) with fc1's bias and fc2 (keys 8..10):
  // shard 0 takes what backward produces first; conv1 and conv2 (keys 0..3,
  // produced last) share shard 3 with fc1's first chunk.
  auto partition = Partition::Create(kLeNet, kDefaultPartitionBytes, 4,
                                     ShardAssignment::kBackwardOrder);
  ASSERT_TRUE(partition.ok()) << partition.status();
  ASSERT_EQ(partition->chunks().size(), 11u);
  EXPECT_EQ(partition->ChunksOfShard(0), (std::vector<uint32_t>{7, 8, 9, 10}));
  EXPECT_EQ(partition->ChunksOfShard(1), (std::vector<uint32_t>{6}));
  EXPECT_EQ(partition->ChunksOfShard(2), (std::vector<uint32_t>{5}));
  EXPECT_EQ(partition->ChunksOfShard(3),
            (std::vector<uint32_t>{0, 1, 2, 3, 4}));
}

TEST(PartitionerTest, BackwardOrderRunsAreContiguousAndBalanced) {
  for (const uint32_t shards : {1u, 2u, 3u, 5u, 8u}) {
    auto partition = Partition::Create(kLeNet, 64 << 10, shards,
                                       ShardAssignment::kBackwardOrder);
    ASSERT_TRUE(partition.ok()) << partition.status();
    const std::vector<Chunk>& chunks = partition->chunks();
    uint64_t largest_chunk = 0;
    for (size_t key = 0; key < chunks.size(); ++key) {
      largest_chunk = std::max(largest_chunk, chunks[key].num_elements);
      // Higher keys never sit on a higher shard than lower ones.
      if (key > 0) {
        EXPECT_GE(chunks[key - 1].shard, chunks[key].shard);
      }
    }
    const uint64_t share = partition->total_elements() / shards;
    for (uint32_t s = 0; s < shards; ++s) {
      const uint64_t n = partition->ShardElements(s);
      EXPECT_LE(n, share + largest_chunk) << shards << " shards, shard " << s;
      EXPECT_GE(n + largest_chunk, share) << shards << " shards, shard " << s;
    }
  }
}

TEST(PartitionerTest, BackwardOrderWithMoreShardsThanChunks) {
  // Two chunks over four shards: each chunk on the shard of its midpoint,
  // the others empty (as with the balanced rule).
  auto partition = Partition::Create({10, 10}, kDefaultPartitionBytes, 4,
                                     ShardAssignment::kBackwardOrder);
  ASSERT_TRUE(partition.ok());
  EXPECT_EQ(partition->chunks()[1].shard, 1u);
  EXPECT_EQ(partition->chunks()[0].shard, 3u);
  EXPECT_TRUE(partition->ChunksOfShard(0).empty());
  EXPECT_TRUE(partition->ChunksOfShard(2).empty());
}

TEST(PartitionerTest, EvenShardsOfLeNetDifferByAtMostOneElement) {
  // 3274634 elements over 4 shards: 818658 or 818659 each, where the
  // balanced rule leaves shard 0 with 854016 (fc1's four equal chunks and
  // every small tensor on the lightest). fc1 (flat 52096..3263359) is cut
  // at the three ends of runs inside it instead of in four equal chunks.
  auto partition = Partition::Create(kLeNet, kDefaultPartitionBytes, 4,
                                     ShardAssignment::kEven);
  ASSERT_TRUE(partition.ok()) << partition.status();
  EXPECT_EQ(partition->ShardElements(0), 818658u);
  EXPECT_EQ(partition->ShardElements(1), 818659u);
  EXPECT_EQ(partition->ShardElements(2), 818658u);
  EXPECT_EQ(partition->ShardElements(3), 818659u);
  ASSERT_EQ(partition->chunks().size(), 11u);
  EXPECT_EQ(partition->chunks()[4].num_elements, 818659u - 52096u);
  // Shard 0 holds the model's end: the logits and fc1's bias whole, and
  // fc1's last 807384 elements.
  EXPECT_EQ(partition->ChunksOfShard(0).back(), partition->chunks().size() - 1);
}

TEST(PartitionerTest, EvenRunsAreExactAndContiguousForAnyShardCount) {
  for (const uint32_t shards : {1u, 2u, 3u, 5u, 8u, 13u}) {
    for (const uint64_t bytes :
         {uint64_t{400}, uint64_t{64 << 10}, kDefaultPartitionBytes}) {
      SCOPED_TRACE(testing::Message() << shards << " shards, " << bytes);
      auto partition =
          Partition::Create(kLeNet, bytes, shards, ShardAssignment::kEven);
      ASSERT_TRUE(partition.ok()) << partition.status();
      const std::vector<Chunk>& chunks = partition->chunks();
      for (size_t key = 1; key < chunks.size(); ++key) {
        EXPECT_GE(chunks[key - 1].shard, chunks[key].shard);
      }
      const uint64_t total = partition->total_elements();
      for (uint32_t s = 0; s < shards; ++s) {
        // floor((s + 1) T / S) - floor(s T / S).
        const uint64_t expected = (s + 1) * total / shards - s * total / shards;
        EXPECT_EQ(partition->ShardElements(s), expected) << "shard " << s;
      }
      uint64_t cut_more = 0;
      for (const uint64_t n : kLeNet)
        cut_more += *Partition::ChunkCount(n, bytes);
      EXPECT_LE(chunks.size(), cut_more + shards - 1);
    }
  }
}

// (elements, shard) of every chunk the even rule cuts, in key order.
using SizesAndShards = std::vector<std::pair<uint64_t, uint32_t>>;
SizesAndShards EvenChunks(const std::vector<uint64_t>& tensors,
                          uint32_t shards) {
  auto partition = Partition::Create(tensors, kDefaultPartitionBytes, shards,
                                     ShardAssignment::kEven);
  EXPECT_TRUE(partition.ok()) << partition.status();
  SizesAndShards out;
  if (!partition.ok()) return out;
  for (const Chunk& c : partition->chunks()) {
    out.push_back({c.num_elements, c.shard});
  }
  return out;
}

TEST(PartitionerTest, EvenWithMoreShardsThanElements) {
  // Three elements over five shards, counted from the end: shard 0 owns
  // none (floor(0) to floor(3/5)), shard 1 the last element, shard 3 the
  // middle one, shard 4 the first.
  EXPECT_EQ(EvenChunks({2, 1}, 5), (SizesAndShards{{1, 4}, {1, 3}, {1, 1}}));
}

TEST(PartitionerTest, EvenPutsAnEmptyTensorWithTheElementAfterIt) {
  // {0, 3, 0} over 2 shards: shard 0 owns flat element 2, shard 1 elements
  // 0 and 1. The first empty tensor goes with element 0 (shard 1), the
  // last, past the model's end, to shard 0. A model of no elements is
  // all shard 0's.
  EXPECT_EQ(EvenChunks({0, 3, 0}, 2),
            (SizesAndShards{{0, 1}, {2, 1}, {1, 0}, {0, 0}}));
  EXPECT_EQ(EvenChunks({0, 0}, 3), (SizesAndShards{{0, 0}, {0, 0}}));
}

TEST(PartitionerTest, EmptyTensorStillHasOneChunk) {
  auto partition = Partition::Create({0, 3}, 8, 1);
  ASSERT_TRUE(partition.ok());
  ASSERT_EQ(partition->chunks().size(), 3u);
  EXPECT_EQ(partition->chunks()[0].num_elements, 0u);
}

TEST(PartitionerTest, ChunkCountIsTheCutOfCreate) {
  EXPECT_EQ(*Partition::ChunkCount(0, 8), 1u);
  EXPECT_EQ(*Partition::ChunkCount(4, 8), 2u);
  EXPECT_EQ(*Partition::ChunkCount(5, 8), 3u);
  EXPECT_EQ(*Partition::ChunkCount(10, 3 * sizeof(float)), 4u);
  // n + max_elements - 1 would wrap here and count 0 chunks.
  const uint64_t n = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ(*Partition::ChunkCount(n, 8), n / 2 + 1);
  EXPECT_EQ(Partition::ChunkCount(10, 3).status().code(),
            absl::StatusCode::kInvalidArgument);
  for (const uint64_t bytes :
       {uint64_t{400}, uint64_t{4100}, uint64_t{64 << 10}}) {
    auto partition = Partition::Create(kLeNet, bytes, 3);
    ASSERT_TRUE(partition.ok());
    uint64_t chunks = 0;
    for (const uint64_t n : kLeNet) chunks += *Partition::ChunkCount(n, bytes);
    EXPECT_EQ(partition->chunks().size(), chunks) << bytes;
  }
}

// Counted before any chunk is made: the first tensor alone (2^31 chunks)
// would take some 80 GB of Chunks before the second one is refused.
TEST(PartitionerTest, TooManyChunksAreRefusedBeforeAnyIsMade) {
  const uint64_t half = uint64_t{1} << 31;
  for (const ShardAssignment rule : kRules) {
    const auto partition = Partition::Create({half, half}, 4, 2, rule);
    EXPECT_EQ(partition.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(partition.status().message(),
              "the model has more than 2^32 - 1 chunks; raise "
              "partition_bytes (4)");
  }
}

TEST(PartitionerTest, RejectsBadArguments) {
  EXPECT_EQ(Partition::Create(kLeNet, 3, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Partition::Create(kLeNet, 1024, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Partition::Create({}, 3, 1).status().code(),
            absl::StatusCode::kInvalidArgument)
      << "partition_bytes is checked with no tensor too";
}

}  // namespace
}  // namespace tern
