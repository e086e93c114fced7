#include "kernels/sum_huffman.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <queue>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "kernels/kernel_util.h"
#include "kernels/ternary_math.h"
#include "kernels/terngrad.h"

namespace tern::kernels {
namespace {

constexpr uint32_t kMaxSymbols = 2 * kHuffmanDirectLimit + 2;
constexpr uint32_t kTableSize = uint32_t{1} << kHuffmanMaxCodeBits;
constexpr uint32_t kNoEscape = 0xFF;  // no symbol has this index

// The symbols of a chunk with N summands.
struct Alphabet {
  uint32_t num_summands;
  uint32_t direct;    // E: sums in [-E, E] are symbols sum + E
  uint32_t size;      // 2E + 1, plus the escape when N > E
  uint32_t escape;    // the escape's index, or kNoEscape
  uint32_t raw_bits;  // an escaped (sum + N): SUM_BITS' width

  explicit Alphabet(uint32_t n)
      : num_summands(n),
        direct(std::min(n, kHuffmanDirectLimit)),
        size(2 * direct + 1 + (n > direct ? 1 : 0)),
        escape(n > direct ? 2 * direct + 1 : kNoEscape),
        raw_bits(SumBits(n)) {}

  uint32_t SymbolOf(int32_t sum) const {
    return static_cast<uint32_t>(std::abs(sum)) <= direct
               ? static_cast<uint32_t>(sum + static_cast<int32_t>(direct))
               : escape;
  }
  size_t HeaderBytes() const { return (size + 1) / 2; }
};

using Lengths = std::array<uint8_t, kMaxSymbols>;
using Counts = std::array<uint64_t, kMaxSymbols>;

// The bits a symbol's code takes in the stream: its length, except in a
// chunk of one symbol, whose code (length 1 in the header) takes none.
Lengths WrittenLengths(const Lengths& lengths) {
  const auto used = std::count_if(lengths.begin(), lengths.end(),
                                  [](uint8_t length) { return length != 0; });
  return used == 1 ? Lengths{} : lengths;
}

// Huffman code lengths of the symbols with nonzero `weights` (two or more).
// Ties break on the node index, so the result is deterministic.
std::vector<uint32_t> HuffmanDepths(const std::vector<uint64_t>& weights) {
  const size_t leaves = weights.size();
  std::vector<uint32_t> parent(2 * leaves - 1, 0);
  using Node = std::pair<uint64_t, uint32_t>;  // (weight, index)
  std::priority_queue<Node, std::vector<Node>, std::greater<Node>> queue;
  for (uint32_t i = 0; i < leaves; ++i) queue.push({weights[i], i});
  for (uint32_t next = static_cast<uint32_t>(leaves); queue.size() > 1;
       ++next) {
    const Node a = queue.top();
    queue.pop();
    const Node b = queue.top();
    queue.pop();
    parent[a.second] = parent[b.second] = next;
    queue.push({a.first + b.first, next});
  }
  // A parent's index is above its children's: walk from the root down.
  std::vector<uint32_t> depth(2 * leaves - 1, 0);
  for (size_t i = 2 * leaves - 2; i-- > 0;) depth[i] = depth[parent[i]] + 1;
  depth.resize(leaves);
  return depth;
}

// Code lengths for the symbol counts, at most kHuffmanMaxCodeBits: while
// the optimal code is too deep, the weights are halved (rounding up, so no
// symbol drops out) and the code rebuilt, which flattens the rare tail.
Lengths BuildLengths(const Counts& counts, const Alphabet& alphabet) {
  Lengths lengths{};
  std::vector<uint32_t> used;
  std::vector<uint64_t> weights;
  for (uint32_t s = 0; s < alphabet.size; ++s) {
    if (counts[s] == 0) continue;
    used.push_back(s);
    weights.push_back(counts[s]);
  }
  if (used.size() == 1) lengths[used[0]] = 1;  // a zero-bit code
  if (used.size() < 2) return lengths;
  for (;;) {
    const std::vector<uint32_t> depths = HuffmanDepths(weights);
    if (*std::max_element(depths.begin(), depths.end()) <=
        kHuffmanMaxCodeBits) {
      for (size_t i = 0; i < used.size(); ++i) lengths[used[i]] = depths[i];
      return lengths;
    }
    for (uint64_t& w : weights) w = (w + 1) / 2;
  }
}

// The canonical code (DEFLATE's rule: shorter codes first, then by symbol),
// each code bit-reversed so that its first bit is the stream's next bit.
std::array<uint16_t, kMaxSymbols> CanonicalCodes(const Lengths& lengths,
                                                 uint32_t size) {
  std::array<uint32_t, kHuffmanMaxCodeBits + 1> per_length{};
  for (uint32_t s = 0; s < size; ++s) {
    if (lengths[s] != 0) ++per_length[lengths[s]];
  }
  std::array<uint32_t, kHuffmanMaxCodeBits + 1> next{};  // per length
  uint32_t code = 0;
  for (uint32_t bits = 1; bits <= kHuffmanMaxCodeBits; ++bits) {
    code = (code + per_length[bits - 1]) << 1;
    next[bits] = code;
  }
  std::array<uint16_t, kMaxSymbols> codes{};
  for (uint32_t s = 0; s < size; ++s) {
    const uint32_t length = lengths[s];
    if (length == 0) continue;
    const uint32_t first_bit_high = next[length]++;
    uint32_t reversed = 0;
    for (uint32_t b = 0; b < length; ++b) {
      reversed |= ((first_bit_high >> b) & 1u) << (length - 1 - b);
    }
    codes[s] = static_cast<uint16_t>(reversed);
  }
  return codes;
}

// ---------------------------------------------------------------------------
// Writing

// Writes whole 8-byte words at its position, so its buffer needs
// kWriterSlack bytes beyond the last one written.
constexpr size_t kWriterSlack = 8;

class BitWriter {
 public:
  explicit BitWriter(uint8_t* out) : out_(out) {}

  // Appends the low `length` (<= 32) bits of `bits`, which has no others.
  // Branch-free: the pending bits (fewer than 8, the rest zero) are stored
  // every time and the position moves by the whole bytes among them.
  void Put(uint64_t bits, uint32_t length) {
    pending_ |= bits << pending_bits_;
    pending_bits_ += length;
    StoreLE64(pending_, out_);
    out_ += pending_bits_ >> 3;
    pending_ >>= pending_bits_ & ~7u;
    pending_bits_ &= 7;
  }

  // The end of the written bytes (the last one zero-padded).
  uint8_t* Finish() const { return out_ + (pending_bits_ != 0 ? 1 : 0); }

 private:
  uint8_t* out_;
  uint64_t pending_ = 0;
  uint32_t pending_bits_ = 0;
};

// ---------------------------------------------------------------------------
// Reading

// The header's lengths, checked: each at most kHuffmanMaxCodeBits, none for
// an empty chunk, otherwise one symbol of length 1 or a complete code.
absl::StatusOr<Lengths> ReadLengths(absl::Span<const uint8_t> packed,
                                    const Alphabet& alphabet, uint64_t n) {
  if (packed.size() < alphabet.HeaderBytes()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "SUM_HUFFMAN payload has %d bytes, shorter than its %d-byte header",
        packed.size(), alphabet.HeaderBytes()));
  }
  Lengths lengths{};
  uint32_t used = 0;
  uint64_t kraft = 0;  // in units of 2^-kHuffmanMaxCodeBits
  for (uint32_t s = 0; s < alphabet.size; ++s) {
    const uint32_t length = (packed[s / 2] >> (4 * (s % 2))) & 0xF;
    if (length > kHuffmanMaxCodeBits) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "SUM_HUFFMAN header: symbol %d has a %d-bit code, above %d", s,
          length, kHuffmanMaxCodeBits));
    }
    lengths[s] = static_cast<uint8_t>(length);
    if (length == 0) continue;
    ++used;
    kraft += kTableSize >> length;
  }
  if (alphabet.size % 2 == 1 && (packed[alphabet.size / 2] >> 4) != 0) {
    return absl::InvalidArgumentError(
        "SUM_HUFFMAN header: nonzero padding nibble");
  }
  if (n == 0 && used == 0) return lengths;
  if (n == 0 || used == 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "SUM_HUFFMAN header codes %d symbols for %d elements", used, n));
  }
  if (used == 1 && kraft == kTableSize / 2) return lengths;
  if (used == 1 || kraft != kTableSize) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "SUM_HUFFMAN header: the code lengths are not a complete prefix "
        "code (Kraft sum %d/%d)",
        kraft, kTableSize));
  }
  return lengths;
}

// Decoding table: entry = symbol | (code length << 8) for every value of the
// stream's next kHuffmanMaxCodeBits bits. Complete codes fill it; a single
// symbol fills it with zero-length entries.
std::vector<uint16_t> DecodeTable(const Lengths& lengths, uint32_t size) {
  std::vector<uint16_t> table(kTableSize, 0);
  const auto codes = CanonicalCodes(lengths, size);
  const Lengths written = WrittenLengths(lengths);
  for (uint32_t s = 0; s < size; ++s) {
    if (lengths[s] == 0) continue;
    const uint32_t length = written[s];
    for (uint32_t i = codes[s]; i < kTableSize; i += 1u << length) {
      table[i] = static_cast<uint16_t>(s | (length << 8));
    }
  }
  return table;
}

// Reads the stream LSB-first; never reads outside its bytes (zeros follow
// the end, which the decoder detects by counting).
class BitReader {
 public:
  explicit BitReader(absl::Span<const uint8_t> bytes) : bytes_(bytes) {}

  // Tops the buffer up to at least 56 bits while bytes remain.
  void Refill() {
    if (next_ + 8 <= bytes_.size()) {
      // Bits loaded above count_ are the bytes' own, so loading them again
      // later ORs in the same values.
      buffer_ |= LoadLE64(bytes_.data() + next_) << count_;
      next_ += (63 - count_) >> 3;
      count_ |= 56;
      return;
    }
    while (count_ <= 56 && next_ < bytes_.size()) {
      buffer_ |= uint64_t{bytes_[next_++]} << count_;
      count_ += 8;
    }
  }

  uint32_t count() const { return count_; }
  uint64_t Peek() const { return buffer_; }
  void Skip(uint32_t bits) {
    buffer_ >>= bits;
    count_ -= bits;
  }
  // Bytes never loaded, and the bits loaded but not consumed.
  size_t bytes_left() const { return bytes_.size() - next_; }
  uint64_t LeftoverBits() const {
    return count_ == 0 ? 0 : buffer_ & ((uint64_t{1} << count_) - 1);
  }

 private:
  absl::Span<const uint8_t> bytes_;
  size_t next_ = 0;
  uint64_t buffer_ = 0;
  uint32_t count_ = 0;
};

absl::Status EndsEarly(uint64_t element) {
  return absl::InvalidArgumentError(
      absl::StrFormat("SUM_HUFFMAN payload ends inside element %d", element));
}

// A second table for long chunks: entry = up to kMultiSymbols symbols
// whose codes all lie in the stream's next kHuffmanMaxCodeBits bits (byte j
// the j-th symbol), their count in byte 4 and their bits in byte 5. Near 0
// a sum's code is a bit or two, so one lookup decodes several. It stops
// before an escape (count 0 when the first symbol is one).
constexpr uint32_t kMultiSymbols = 4;
constexpr uint64_t kMultiTableMinElements = 4 * kTableSize;

std::vector<uint64_t> MultiTable(const std::vector<uint16_t>& table,
                                 uint32_t escape) {
  std::vector<uint64_t> multi(kTableSize, 0);
  for (uint32_t index = 0; index < kTableSize; ++index) {
    uint64_t entry = 0;
    uint32_t count = 0, bits = 0;
    for (; count < kMultiSymbols; ++count) {
      const uint32_t single = table[(index >> bits) & (kTableSize - 1)];
      const uint32_t length = single >> 8;
      const uint32_t symbol = single & 0xFF;
      if (symbol == escape || length == 0 ||
          bits + length > kHuffmanMaxCodeBits) {
        break;
      }
      entry |= uint64_t{symbol} << (8 * count);
      bits += length;
    }
    multi[index] = entry | uint64_t{count} << 32 | uint64_t{bits} << 40;
  }
  return multi;
}

// Decodes one chunk's stream (after the header) into out[i] = value of the
// sum: values[symbol] for direct symbols, value_of(sum) for escaped ones.
template <typename T, typename ValueOf>
class ChunkDecoder {
 public:
  ChunkDecoder(const Alphabet& alphabet, const Lengths& lengths,
               absl::Span<const uint8_t> stream, absl::Span<T> out,
               ValueOf value_of)
      : alphabet_(alphabet),
        table_(DecodeTable(lengths, alphabet.size)),
        reader_(stream),
        out_(out),
        value_of_(value_of) {
    for (uint32_t s = 0; s < 2 * alphabet.direct + 1; ++s) {
      values_[s] = value_of(static_cast<int32_t>(s) -
                            static_cast<int32_t>(alphabet.direct));
    }
  }

  absl::Status Run() {
    uint64_t i = 0;
    if (out_.size() >= kMultiTableMinElements) {
      absl::Status status = DecodeMany(&i);
      if (!status.ok()) return status;
    }
    for (; i < out_.size(); ++i) {
      absl::Status status = DecodeOne(i);
      if (!status.ok()) return status;
    }
    if (reader_.bytes_left() != 0 || reader_.count() >= 8 ||
        reader_.LeftoverBits() != 0) {
      return absl::InvalidArgumentError(
          "SUM_HUFFMAN payload: bytes or nonzero padding after the last "
          "element");
    }
    return absl::OkStatus();
  }

 private:
  // Up to four sums a lookup while four elements remain (*i moves on);
  // escapes and the stream's end go through DecodeOne.
  absl::Status DecodeMany(uint64_t* next) {
    const std::vector<uint64_t> multi = MultiTable(table_, alphabet_.escape);
    // The hot loop works on locals: stores to out_ (int32 for
    // UnpackSums) could otherwise alias the reader's counters.
    BitReader reader = reader_;
    T* out = out_.data();
    const uint64_t n = out_.size();
    uint64_t i = *next;
    while (i + kMultiSymbols <= n) {
      if (reader.count() < kHuffmanMaxCodeBits) reader.Refill();
      const uint64_t entry = multi[reader.Peek() & (kTableSize - 1)];
      const uint32_t count = (entry >> 32) & 0xFF;
      const uint32_t bits = (entry >> 40) & 0xFF;
      if (count == 0 || bits > reader.count()) {
        reader_ = reader;
        absl::Status status = DecodeOne(i++);
        if (!status.ok()) return status;
        reader = reader_;
        continue;
      }
      // All four written; those past `count` are overwritten next.
      for (uint32_t j = 0; j < kMultiSymbols; ++j) {
        out[i + j] = values_[(entry >> (8 * j)) & 0xFF];
      }
      reader.Skip(bits);
      i += count;
    }
    reader_ = reader;
    *next = i;
    return absl::OkStatus();
  }

  // Element i through the one-sum table.
  absl::Status DecodeOne(uint64_t i) {
    if (reader_.count() < kHuffmanMaxCodeBits) reader_.Refill();
    const uint32_t entry = table_[reader_.Peek() & (kTableSize - 1)];
    const uint32_t length = entry >> 8;
    const uint32_t symbol = entry & 0xFF;
    if (length > reader_.count()) return EndsEarly(i);
    reader_.Skip(length);
    if (symbol != alphabet_.escape) {
      out_[i] = values_[symbol];
      return absl::OkStatus();
    }
    return DecodeEscaped(i);
  }

  // The raw (sum + N) after an escape: only sums beyond +-E may be escaped.
  absl::Status DecodeEscaped(uint64_t i) {
    const uint32_t raw_bits = alphabet_.raw_bits;
    if (reader_.count() < raw_bits) reader_.Refill();
    if (raw_bits > reader_.count()) return EndsEarly(i);
    const uint64_t field = reader_.Peek() & ((uint64_t{1} << raw_bits) - 1);
    reader_.Skip(raw_bits);
    const uint32_t n = alphabet_.num_summands;
    const int64_t sum = static_cast<int64_t>(field) - n;
    if (field > 2 * uint64_t{n} ||
        std::abs(sum) <= static_cast<int64_t>(alphabet_.direct)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "SUM_HUFFMAN payload: element %d escapes the sum %d, outside "
          "(%d, %d]",
          i, sum, alphabet_.direct, n));
    }
    out_[i] = value_of_(static_cast<int32_t>(sum));
    return absl::OkStatus();
  }

  const Alphabet& alphabet_;
  const std::vector<uint16_t> table_;
  BitReader reader_;
  absl::Span<T> out_;
  ValueOf value_of_;
  std::array<T, kMaxSymbols> values_{};
};

template <typename T, typename ValueOf>
absl::Status DecodeChunk(absl::Span<const uint8_t> packed,
                         uint32_t num_summands, absl::Span<T> out,
                         ValueOf value_of) {
  if (num_summands == 0 || num_summands > kMaxSummands) {
    return absl::InvalidArgumentError(
        absl::StrFormat("sum payload has %d summands, want 1 to %d",
                        num_summands, kMaxSummands));
  }
  const Alphabet alphabet(num_summands);
  const absl::StatusOr<Lengths> lengths =
      ReadLengths(packed, alphabet, out.size());
  if (!lengths.ok()) return lengths.status();
  ChunkDecoder<T, ValueOf> decoder(alphabet, *lengths,
                                   packed.subspan(alphabet.HeaderBytes()), out,
                                   value_of);
  return decoder.Run();
}

// The symbols' counts. Four histograms, so that runs of one symbol do not
// wait on each other's increments.
Counts CountSymbols(absl::Span<const int32_t> sums, const Alphabet& alphabet) {
  const int32_t n = static_cast<int32_t>(alphabet.num_summands);
  std::array<Counts, 4> partial{};
  for (size_t i = 0; i < sums.size(); ++i) {
    // Every sum in [-N, N]: the server only adds validated codes.
    TERN_KERNEL_CHECK(sums[i] >= -n && sums[i] <= n);
    ++partial[i % 4][alphabet.SymbolOf(sums[i])];
  }
  Counts counts{};
  for (uint32_t s = 0; s < alphabet.size; ++s) {
    counts[s] = partial[0][s] + partial[1][s] + partial[2][s] + partial[3][s];
  }
  return counts;
}

// Per symbol, code | (bits written << 16), one load per element.
std::array<uint32_t, kMaxSymbols> CodeEntries(const Lengths& lengths,
                                              uint32_t size) {
  const auto codes = CanonicalCodes(lengths, size);
  const Lengths written = WrittenLengths(lengths);
  std::array<uint32_t, kMaxSymbols> entries{};
  for (uint32_t s = 0; s < size; ++s) {
    entries[s] = codes[s] | uint32_t{written[s]} << 16;
  }
  return entries;
}

uint64_t StreamBits(const Counts& counts,
                    const std::array<uint32_t, kMaxSymbols>& entries,
                    const Alphabet& alphabet) {
  uint64_t bits = 0;
  for (uint32_t s = 0; s < alphabet.size; ++s) {
    bits += counts[s] * (entries[s] >> 16);
  }
  if (alphabet.escape != kNoEscape) {
    bits += counts[alphabet.escape] * alphabet.raw_bits;
  }
  return bits;
}

}  // namespace

std::string PackSumsHuffman(absl::Span<const int32_t> sums,
                            uint32_t num_summands) {
  TERN_KERNEL_CHECK(num_summands >= 1 && num_summands <= kMaxSummands);
  const Alphabet alphabet(num_summands);
  const Counts counts = CountSymbols(sums, alphabet);
  const Lengths lengths = BuildLengths(counts, alphabet);
  const auto entries = CodeEntries(lengths, alphabet.size);
  const size_t size =
      alphabet.HeaderBytes() + (StreamBits(counts, entries, alphabet) + 7) / 8;
  std::string out(size + kWriterSlack, '\0');
  uint8_t* bytes = reinterpret_cast<uint8_t*>(out.data());
  for (uint32_t s = 0; s < alphabet.size; ++s) {
    bytes[s / 2] |= static_cast<uint8_t>(lengths[s] << (4 * (s % 2)));
  }
  BitWriter writer(bytes + alphabet.HeaderBytes());
  for (const int32_t sum : sums) {
    const uint32_t symbol = alphabet.SymbolOf(sum);
    writer.Put(entries[symbol] & 0xFFFF, entries[symbol] >> 16);
    if (symbol == alphabet.escape) {
      writer.Put(static_cast<uint32_t>(sum) + num_summands, alphabet.raw_bits);
    }
  }
  TERN_KERNEL_CHECK(writer.Finish() == bytes + size);
  out.resize(size);
  return out;
}

absl::Status UnpackSumsHuffman(absl::Span<const uint8_t> packed,
                               uint32_t num_summands,
                               absl::Span<int32_t> sums) {
  return DecodeChunk(packed, num_summands, sums,
                     [](int32_t sum) { return sum; });
}

absl::Status DecodeSumsHuffman(absl::Span<const uint8_t> packed,
                               uint32_t num_summands, float factor,
                               absl::Span<float> out) {
  return DecodeChunk(packed, num_summands, out, [factor](int32_t sum) {
    return DecodeValue(sum, factor);
  });
}

}  // namespace tern::kernels
