// A ChunkedMessageBytes split (core/chunked_message_bytes.h) as the gRPC
// slices of one message: the framing in a slice that owns it, each
// borrowed data in a slice of its own that points where the data lies and
// holds `keep_alive`, the owner of that data, until gRPC lets go of it
// (after the message is sent, or a retry no longer needs it). The worker's
// pushes and the shard's answers go out this way, without a copy of their
// data in user space.
#ifndef TERN_CORE_MESSAGE_SLICES_H_
#define TERN_CORE_MESSAGE_SLICES_H_

#include <cstddef>
#include <memory>
#include <vector>

#include "core/chunked_message_bytes.h"
#include "grpcpp/grpcpp.h"

namespace tern::core {

// Chunk data below this is copied into the framing (SplitAt's
// borrow_from): a slice of its own costs an allocation and reference
// counting, more than copying a few KiB.
inline constexpr size_t kBorrowBytes = 16 * 1024;

// `keep_alive` must own every borrowed data of `split`, and the data must
// not change while the slices live.
std::vector<grpc::Slice> MessageSlices(ChunkedMessageBytes::Split split,
                                       std::shared_ptr<const void> keep_alive);

}  // namespace tern::core

#endif  // TERN_CORE_MESSAGE_SLICES_H_
