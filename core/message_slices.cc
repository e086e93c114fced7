#include "core/message_slices.h"

#include <string>
#include <utility>

namespace tern::core {
namespace {

// A slice that owns `bytes`.
grpc::Slice OwningSlice(std::string bytes) {
  auto* owned = new std::string(std::move(bytes));
  return grpc::Slice(
      owned->data(), owned->size(),
      [](void* p) { delete static_cast<std::string*>(p); }, owned);
}

// A slice of `data`; it holds `keep_alive` until it is released.
grpc::Slice BorrowedSlice(const std::string& data,
                          const std::shared_ptr<const void>& keep_alive) {
  auto* keep = new std::shared_ptr<const void>(keep_alive);
  // The const_cast is the API's: gRPC only reads a slice it sends.
  return grpc::Slice(
      const_cast<char*>(data.data()), data.size(),
      [](void* p) { delete static_cast<std::shared_ptr<const void>*>(p); },
      keep);
}

}  // namespace

std::vector<grpc::Slice> MessageSlices(ChunkedMessageBytes::Split split,
                                       std::shared_ptr<const void> keep_alive) {
  const size_t framing_size = split.framing.size();
  const grpc::Slice framing = OwningSlice(std::move(split.framing));
  std::vector<grpc::Slice> slices;
  size_t from = 0;
  for (const ChunkedMessageBytes::Borrowed& borrowed : split.borrowed) {
    if (borrowed.at > from) slices.push_back(framing.sub(from, borrowed.at));
    slices.push_back(BorrowedSlice(*borrowed.data, keep_alive));
    from = borrowed.at;
  }
  if (framing_size > from) slices.push_back(framing.sub(from, framing_size));
  return slices;
}

}  // namespace tern::core
