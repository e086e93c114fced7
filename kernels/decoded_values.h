// Decoded floats in memory that is not zero-filled first. A push of 4 MiB
// is decoded on the shard into a fresh buffer every step; std::vector<float>
// would write zeros over it only for the decode to write every element
// again (Codec::Decode writes all of `out`, whatever it held:
// codec_conformance_test), one pass over the chunk for nothing.
#ifndef TERN_KERNELS_DECODED_VALUES_H_
#define TERN_KERNELS_DECODED_VALUES_H_

#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

namespace tern::kernels {

// std::allocator, except that an element made without a value (resize,
// the size constructor) is default-initialized: for float, left as it is.
template <typename T>
class DefaultInitAllocator : public std::allocator<T> {
 public:
  template <typename U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <typename U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}

  template <typename U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

// A chunk's decoded values: resize() leaves new elements unwritten, so
// only write into them (a decode) before reading.
using DecodedValues = std::vector<float, DefaultInitAllocator<float>>;

}  // namespace tern::kernels

#endif  // TERN_KERNELS_DECODED_VALUES_H_
