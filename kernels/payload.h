// A payload as the kernels see it: the plain-C++ twin of tern.v1.Payload
// (proto/tern/v1/payload.proto documents every layout). The enum values are
// the proto's, so the roles convert between the two with a cast after
// checking the range (server/, worker/ and global/ do that; kernels never
// see protobuf).
#ifndef TERN_KERNELS_PAYLOAD_H_
#define TERN_KERNELS_PAYLOAD_H_

#include <cstdint>
#include <string>
#include <vector>

namespace tern::kernels {

enum class CodecId : uint32_t {
  kUnspecified = 0,
  kFp32 = 1,
  kFp16 = 2,
  kTernGrad = 3,
  kOneBit = 4,
  kThreshold = 5,
  kAdaptive = 6,
  kDropping = 7,
  kQsgd = 8,
  kInt8 = 9,
};

enum class Layout : uint32_t {
  kUnspecified = 0,
  kRaw = 1,
  kTernary2Bit = 2,
  kTernaryBase3 = 3,
  kSumBits = 4,
  kSumRadix = 5,
  kSignBits = 6,
  kIndexSign = 7,
  kIndexValue = 8,
  kQsgdLevels = 9,
  kIndex2Bit = 10,
  kSumHuffman = 11,
};

// The largest Layout value this build knows.
inline constexpr Layout kLastLayout = Layout::kSumHuffman;

// The format version every layout is written with today.
inline constexpr uint32_t kFormatVersion = 1;

// The codec's name on the command line and in messages ("terngrad"), or
// "unknown" for a value outside the enum (e.g. from a newer peer).
constexpr const char* CodecName(CodecId id) {
  switch (id) {
    case CodecId::kUnspecified:
      return "unspecified";
    case CodecId::kFp32:
      return "fp32";
    case CodecId::kFp16:
      return "fp16";
    case CodecId::kTernGrad:
      return "terngrad";
    case CodecId::kOneBit:
      return "onebit";
    case CodecId::kThreshold:
      return "threshold";
    case CodecId::kAdaptive:
      return "adaptive";
    case CodecId::kDropping:
      return "dropping";
    case CodecId::kQsgd:
      return "qsgd";
    case CodecId::kInt8:
      return "int8";
  }
  return "unknown";
}

// The layout's proto name without its prefix ("TERNARY_2BIT"), for messages.
constexpr const char* LayoutName(Layout layout) {
  switch (layout) {
    case Layout::kUnspecified:
      return "UNSPECIFIED";
    case Layout::kRaw:
      return "RAW";
    case Layout::kTernary2Bit:
      return "TERNARY_2BIT";
    case Layout::kTernaryBase3:
      return "TERNARY_BASE3";
    case Layout::kSumBits:
      return "SUM_BITS";
    case Layout::kSumRadix:
      return "SUM_RADIX";
    case Layout::kSignBits:
      return "SIGN_BITS";
    case Layout::kIndexSign:
      return "INDEX_SIGN";
    case Layout::kIndexValue:
      return "INDEX_VALUE";
    case Layout::kQsgdLevels:
      return "QSGD_LEVELS";
    case Layout::kIndex2Bit:
      return "INDEX_2BIT";
    case Layout::kSumHuffman:
      return "SUM_HUFFMAN";
  }
  return "UNKNOWN";
}

struct Payload {
  CodecId codec = CodecId::kUnspecified;
  Layout layout = Layout::kUnspecified;
  uint32_t format_version = kFormatVersion;
  uint64_t num_elements = 0;
  uint32_t num_summands = 1;
  std::vector<float> scalers;
  std::string data;
};

}  // namespace tern::kernels

#endif  // TERN_KERNELS_PAYLOAD_H_
