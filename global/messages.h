// The plain-C++ twins of the tern.v1 global-server messages
// (proto/tern/v1/global_server.proto documents every field). The round
// aggregator works on these; global/gs_service.cc converts them from and to
// protobuf, so the aggregator is tested without protobuf or gRPC (STYLE.md,
// habit 7).
#ifndef TERN_GLOBAL_MESSAGES_H_
#define TERN_GLOBAL_MESSAGES_H_

#include <cstdint>
#include <vector>

#include "kernels/payload.h"

namespace tern::global {

struct RegisterRequest {
  uint32_t datacenter = 0;
  uint32_t num_datacenters = 0;
  uint64_t param_spec_hash = 0;
  uint64_t param_checksum = 0;
  // Element count of each chunk, by chunk key.
  std::vector<uint64_t> chunk_elements;
  kernels::CodecId update_codec = kernels::CodecId::kUnspecified;
  // kUnspecified picks the codec's default layout.
  kernels::Layout update_layout = kernels::Layout::kUnspecified;
  // Chunks whose updates are fp32 RAW whatever update_codec is, ascending.
  std::vector<uint32_t> fp32_chunk_keys;
};

struct RegisterReply {
  // The round the LPS sends next.
  uint64_t next_round = 0;
  double t_global_s = 0;
  double hold_timeout_s = 0;
  uint32_t max_lag = 0;
};

struct ChunkPayload {
  uint32_t chunk_key = 0;
  kernels::Payload payload;
};

struct SyncRequest {
  uint32_t datacenter = 0;
  uint64_t round = 0;
  std::vector<ChunkPayload> updates;
};

// A data center's updates for one round, as summed into an average.
struct Contribution {
  uint32_t datacenter = 0;
  uint64_t round = 0;

  friend bool operator==(const Contribution& a, const Contribution& b) {
    return a.datacenter == b.datacenter && a.round == b.round;
  }
};

// The answer of one closed round, the same for every data center.
struct RoundAnswer {
  uint64_t round = 0;
  // A = (1/K) * sum_d U_d, encoded, for every chunk any data center sent,
  // in chunk-key order.
  std::vector<ChunkPayload> average;
  // Data centers that did not send this round before it closed, ascending.
  std::vector<uint32_t> lagging;
  // What the average sums, in the order it was added.
  std::vector<Contribution> contributions;
};

}  // namespace tern::global

#endif  // TERN_GLOBAL_MESSAGES_H_
