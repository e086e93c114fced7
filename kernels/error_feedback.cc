#include "kernels/error_feedback.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_format.h"

namespace tern::kernels {
namespace {

// SaveState's record, all little-endian:
//   char[4] "TNEF", uint32 version, uint32 codec id, uint32 chunk count,
//   then per chunk, by increasing key: uint32 key, uint64 length,
//   length float32 values.
constexpr char kMagic[4] = {'T', 'N', 'E', 'F'};
constexpr uint32_t kStateVersion = 1;
constexpr size_t kHeaderBytes = 16;
constexpr size_t kChunkHeaderBytes = 12;

void PutU32(uint32_t value, std::string* out) {
  for (int i = 0; i < 4; ++i)
    out->push_back(static_cast<char>(value >> (8 * i)));
}

void PutU64(uint64_t value, std::string* out) {
  for (int i = 0; i < 8; ++i)
    out->push_back(static_cast<char>(value >> (8 * i)));
}

uint32_t GetU32(const char* in) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i) {
    value |= static_cast<uint32_t>(static_cast<uint8_t>(in[i])) << (8 * i);
  }
  return value;
}

uint64_t GetU64(const char* in) {
  return GetU32(in) | static_cast<uint64_t>(GetU32(in + 4)) << 32;
}

uint32_t FloatBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return bits;
}

float BitsFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

// The index of the first non-finite value, or values.size().
size_t FirstNonFinite(absl::Span<const float> values) {
  // One branch-free pass (it vectorizes) for the common all-finite case;
  // the position only when something is wrong.
  bool all_finite = true;
  for (const float value : values)
    all_finite &= std::abs(value) <= std::numeric_limits<float>::max();
  if (all_finite) return values.size();
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isfinite(values[i])) return i;
  }
  return values.size();
}

using Residuals = absl::flat_hash_map<uint32_t, std::vector<float>>;

// The record's header: the magic, the version, `inner`'s codec, and one
// entry for each of the `registered` chunks.
absl::Status CheckStateHeader(absl::string_view state, const Codec& inner,
                              size_t registered) {
  if (state.size() < kHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "error feedback state of %d bytes is shorter than its %d-byte header",
        state.size(), kHeaderBytes));
  }
  if (std::memcmp(state.data(), kMagic, sizeof(kMagic)) != 0) {
    return absl::InvalidArgumentError(
        "error feedback state does not start with \"TNEF\"");
  }
  const uint32_t version = GetU32(state.data() + 4);
  if (version != kStateVersion) {
    return absl::InvalidArgumentError(
        absl::StrFormat("error feedback state version %d is not supported "
                        "(want %d)",
                        version, kStateVersion));
  }
  const uint32_t codec = GetU32(state.data() + 8);
  if (codec != static_cast<uint32_t>(inner.id())) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "error feedback state is of codec %s (%d), this one is %s",
        CodecName(static_cast<CodecId>(codec)), codec, inner.name()));
  }
  const uint32_t count = GetU32(state.data() + 12);
  if (count != registered) {
    return absl::InvalidArgumentError(
        absl::StrFormat("error feedback state has %d chunks, %d are registered",
                        count, registered));
  }
  return absl::OkStatus();
}

// Reads chunk entry `entry`, which starts at *pos, into (*restored)[key]
// and moves *pos past it: a chunk of `registered`, of its length, not read
// before, whose values are all there and finite.
absl::Status ReadChunkEntry(absl::string_view state, uint32_t entry,
                            const Residuals& registered, size_t* pos,
                            Residuals* restored) {
  if (state.size() - *pos < kChunkHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "error feedback state ends inside the header of chunk entry %d",
        entry));
  }
  const uint32_t key = GetU32(state.data() + *pos);
  const uint64_t length = GetU64(state.data() + *pos + 4);
  *pos += kChunkHeaderBytes;
  const auto chunk = registered.find(key);
  if (chunk == registered.end()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "error feedback state has chunk %d, which is not registered", key));
  }
  if (length != chunk->second.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "error feedback state has %d values for chunk %d, which has %d", length,
        key, chunk->second.size()));
  }
  if (restored->contains(key)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("error feedback state has chunk %d twice", key));
  }
  // length is a registered chunk's size, so 4 * length cannot overflow.
  if ((state.size() - *pos) / 4 < length) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "error feedback state ends inside the values of chunk %d", key));
  }
  std::vector<float>& values = (*restored)[key];
  values.resize(length);
  for (uint64_t i = 0; i < length; ++i) {
    values[i] = BitsFloat(GetU32(state.data() + *pos + 4 * i));
  }
  *pos += 4 * length;
  const size_t bad = FirstNonFinite(values);
  if (bad < values.size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("error feedback state: chunk %d value %d is %g", key,
                        bad, values[bad]));
  }
  return absl::OkStatus();
}

}  // namespace

ErrorFeedback::ErrorFeedback(std::unique_ptr<Codec> inner)
    : inner_(std::move(inner)) {}

absl::Status ErrorFeedback::Register(uint32_t chunk_key,
                                     uint64_t num_elements) {
  const auto it = residuals_.find(chunk_key);
  if (it != residuals_.end()) {
    if (it->second.size() == num_elements) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrFormat("chunk %d is registered with %d elements, not %d",
                        chunk_key, it->second.size(), num_elements));
  }
  residuals_[chunk_key].assign(num_elements, 0.0f);
  return absl::OkStatus();
}

absl::Status ErrorFeedback::Compensate(uint32_t chunk_key,
                                       absl::Span<float> values) {
  const auto it = residuals_.find(chunk_key);
  if (it == residuals_.end()) {
    return absl::NotFoundError(
        absl::StrFormat("chunk %d has no residual: not registered", chunk_key));
  }
  const std::vector<float>& residual = it->second;
  if (values.size() != residual.size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("chunk %d has %d elements, its residual %d", chunk_key,
                        values.size(), residual.size()));
  }
  for (size_t i = 0; i < values.size(); ++i) values[i] += residual[i];
  return absl::OkStatus();
}

absl::StatusOr<Payload> ErrorFeedback::EncodeCompensated(
    uint32_t chunk_key, absl::Span<const float> values,
    const EncodeContext& context) {
  const auto it = residuals_.find(chunk_key);
  if (it == residuals_.end()) {
    return absl::NotFoundError(
        absl::StrFormat("chunk %d has no residual: not registered", chunk_key));
  }
  std::vector<float>& residual = it->second;
  if (values.size() != residual.size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("chunk %d has %d elements, its residual %d", chunk_key,
                        values.size(), residual.size()));
  }
  // A NaN or an infinity in the residual would never leave it again: every
  // later step of the chunk would carry it. Refuse it here and keep the
  // residual as it was (the worker stops on non-finite gradients anyway).
  const size_t bad = FirstNonFinite(values);
  if (bad < values.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "chunk %d: compensated value %d is %g", chunk_key, bad, values[bad]));
  }
  absl::StatusOr<Payload> payload = inner_->Encode(values, context);
  if (!payload.ok()) return payload.status();
  // The new residual is what the push does not carry, as the receiver
  // decodes it (Seide et al. 2014, Sec. 3: the quantization error is added
  // to the next minibatch's gradient). It is built aside and swapped in, so
  // that a failure leaves the old one.
  std::vector<float> next(values.size());
  absl::Status status = inner_->Decode(*payload, absl::MakeSpan(next));
  if (!status.ok()) {
    return absl::InternalError(
        absl::StrFormat("chunk %d: codec %s cannot decode its own push: %s",
                        chunk_key, inner_->name(), status.message()));
  }
  for (size_t i = 0; i < values.size(); ++i) next[i] = values[i] - next[i];
  const size_t overflow = FirstNonFinite(next);
  if (overflow < next.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "chunk %d: the residual of element %d overflows (value %g)", chunk_key,
        overflow, values[overflow]));
  }
  residual.swap(next);
  return payload;
}

absl::StatusOr<absl::Span<const float>> ErrorFeedback::Residual(
    uint32_t chunk_key) const {
  const auto it = residuals_.find(chunk_key);
  if (it == residuals_.end()) {
    return absl::NotFoundError(
        absl::StrFormat("chunk %d has no residual: not registered", chunk_key));
  }
  return absl::Span<const float>(it->second);
}

std::string ErrorFeedback::SaveState() const {
  // By key, so that the same residuals always give the same bytes.
  std::vector<uint32_t> keys;
  keys.reserve(residuals_.size());
  size_t floats = 0;
  for (const auto& [key, residual] : residuals_) {
    keys.push_back(key);
    floats += residual.size();
  }
  std::sort(keys.begin(), keys.end());
  std::string out;
  out.reserve(kHeaderBytes + keys.size() * kChunkHeaderBytes + 4 * floats);
  out.append(kMagic, sizeof(kMagic));
  PutU32(kStateVersion, &out);
  PutU32(static_cast<uint32_t>(inner_->id()), &out);
  PutU32(static_cast<uint32_t>(keys.size()), &out);
  for (const uint32_t key : keys) {
    const std::vector<float>& residual = residuals_.at(key);
    PutU32(key, &out);
    PutU64(residual.size(), &out);
    for (const float value : residual) PutU32(FloatBits(value), &out);
  }
  return out;
}

absl::Status ErrorFeedback::RestoreState(absl::string_view state) {
  if (absl::Status status = CheckStateHeader(state, *inner_, residuals_.size());
      !status.ok()) {
    return status;
  }
  // Everything is read into `restored` first, so that any error leaves the
  // residuals as they were. The header's count is the registered chunks'.
  const size_t count = residuals_.size();
  Residuals restored;
  restored.reserve(count);
  size_t pos = kHeaderBytes;
  for (uint32_t entry = 0; entry < count; ++entry) {
    if (absl::Status status =
            ReadChunkEntry(state, entry, residuals_, &pos, &restored);
        !status.ok()) {
      return status;
    }
  }
  if (pos != state.size()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "error feedback state has %d bytes after its last chunk",
        state.size() - pos));
  }
  // count == residuals_.size(), every key registered and none twice: the
  // same set of chunks.
  for (auto& [key, values] : restored) residuals_[key].swap(values);
  return absl::OkStatus();
}

}  // namespace tern::kernels
