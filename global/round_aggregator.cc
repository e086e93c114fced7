#include "global/round_aggregator.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "common/checksum.h"
#include "kernels/codec_options.h"
#include "kernels/codec_registry.h"

namespace tern::global {
namespace {

using kernels::CodecId;
using kernels::Layout;

// A message names at most this many data centers.
constexpr size_t kMaxNamed = 16;
// Per-chunk framing of a message (key, codec, layout, version, counts,
// scalers, length prefixes) and slack for the rest, as the shards count.
constexpr uint64_t kChunkFraming = 128;
constexpr uint64_t kMessageSlack = 1ull << 20;

std::string Seconds(absl::Duration duration) {
  return absl::StrCat(absl::ToDoubleSeconds(duration), "s");
}

// The layout the updates of `codec` travel in, `requested` resolved to the
// codec's default; INVALID_ARGUMENT for what the GS cannot average.
//
// LAYOUT_INDEX_VALUE (the sparse fp32 updates of the `gaia` mode) is not
// accepted yet: its packing (kernels/index_packing.h) is private to
// kernels/, so the GS cannot decode or write it; `gaia` sends fp32 RAW and
// gets fp32 RAW back until it is visible (global/README.md).
absl::StatusOr<Layout> UpdateLayout(CodecId codec, Layout requested) {
  auto refuse = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "update codec ", kernels::CodecName(codec), " with layout ",
        kernels::LayoutName(requested),
        " is not one the GS averages (fp32 or fp16 in RAW, terngrad in "
        "TERNARY_2BIT or TERNARY_BASE3)"));
  };
  switch (codec) {
    case CodecId::kFp32:
    case CodecId::kFp16:
      if (requested == Layout::kUnspecified) return Layout::kRaw;
      if (requested == Layout::kRaw) return requested;
      return refuse();
    case CodecId::kTernGrad:
      if (requested == Layout::kUnspecified) return Layout::kTernary2Bit;
      if (requested == Layout::kTernary2Bit ||
          requested == Layout::kTernaryBase3) {
        return requested;
      }
      return refuse();
    default:
      return refuse();
  }
}

// The most bytes one chunk's payload of `elements` takes in `layout`.
uint64_t PayloadBytesBound(CodecId codec, Layout layout, uint64_t elements) {
  switch (layout) {
    case Layout::kTernary2Bit:
    case Layout::kTernaryBase3:
      return (elements + 3) / 4;  // base 3 packs 5 per byte: smaller
    default:
      return (codec == CodecId::kFp16 ? 2 : 4) * elements;
  }
}

}  // namespace

// Callbacks collected under the lock and run when this object is
// destroyed. Declared before the MutexLock of a scope, it is destroyed after
// the lock is released, so no callback ever runs with mu_ held.
class RoundAggregator::Deferred {
 public:
  Deferred() = default;
  Deferred(const Deferred&) = delete;
  Deferred& operator=(const Deferred&) = delete;
  ~Deferred() {
    for (std::function<void()>& callback : callbacks_) callback();
  }

  void Answer(SyncCallback done, absl::StatusOr<RoundAnswerPtr> answer) {
    callbacks_.push_back(
        [done = std::move(done), answer = std::move(answer)]() mutable {
          done(std::move(answer));
        });
  }

 private:
  std::vector<std::function<void()>> callbacks_;
};

absl::StatusOr<std::unique_ptr<RoundAggregator>> RoundAggregator::Create(
    RoundAggregatorOptions options, Logger logger) {
  if (options.num_datacenters == 0) {
    return absl::InvalidArgumentError("--num_datacenters must be at least 1");
  }
  if (options.t_global <= absl::ZeroDuration() ||
      options.hold_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "--t_global_s and --hold_timeout_s must be positive");
  }
  if (options.max_message_bytes == 0) {
    return absl::InvalidArgumentError("--max_message_mb must be positive");
  }
  if (!options.clock) {
    return absl::InvalidArgumentError("the round aggregator needs a clock");
  }
  if (logger == nullptr) logger = MakeNullLogger();
  return std::unique_ptr<RoundAggregator>(
      new RoundAggregator(std::move(options), std::move(logger)));
}

RoundAggregator::RoundAggregator(RoundAggregatorOptions options, Logger logger)
    : options_(std::move(options)), logger_(std::move(logger)) {
  const uint32_t k = options_.num_datacenters;
  registered_.assign(k, false);
  next_round_.assign(k, 0);
  adding_.assign(k, false);
  sent_.assign(k, false);
  sums_.resize(k);
}

RoundAggregator::~RoundAggregator() {
  Close(absl::UnavailableError("the global server is shutting down"));
}

// --- Register ---

absl::Status RoundAggregator::CheckRegisterOptions(
    const RegisterRequest& request) const {
  const uint32_t k = options_.num_datacenters;
  if (request.datacenter >= k) {
    return absl::InvalidArgumentError(
        absl::StrCat("datacenter ", request.datacenter,
                     " is not below --num_datacenters=", k, " of the GS"));
  }
  if (request.num_datacenters != k) {
    return absl::InvalidArgumentError(
        absl::StrCat("data center ", request.datacenter,
                     " runs with num_datacenters=", request.num_datacenters,
                     ", but the GS was started with --num_datacenters=", k));
  }
  absl::StatusOr<Layout> layout =
      UpdateLayout(request.update_codec, request.update_layout);
  if (!layout.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "data center ", request.datacenter, ": ", layout.status().message()));
  }
  const std::vector<uint64_t>& elements = request.chunk_elements;
  const std::vector<uint32_t>& fp32_keys = request.fp32_chunk_keys;
  for (size_t i = 0; i < fp32_keys.size(); ++i) {
    if (fp32_keys[i] >= elements.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "data center ", request.datacenter, ": fp32 chunk key ", fp32_keys[i],
          " is beyond the model's ", elements.size(), " chunks"));
    }
    if (i > 0 && fp32_keys[i] <= fp32_keys[i - 1]) {
      return absl::InvalidArgumentError(
          absl::StrCat("data center ", request.datacenter,
                       ": fp32 chunk keys are not strictly ascending (",
                       fp32_keys[i], " after ", fp32_keys[i - 1], ")"));
    }
  }
  // The widest answer (every chunk sent, every element nonzero) must fit
  // the message limit: the LPSs' requests are no larger.
  uint64_t bytes = kMessageSlack;
  size_t next_fp32 = 0;
  for (size_t key = 0; key < elements.size(); ++key) {
    const bool fp32 =
        next_fp32 < fp32_keys.size() && fp32_keys[next_fp32] == key;
    if (fp32) ++next_fp32;
    const CodecId codec = fp32 ? CodecId::kFp32 : request.update_codec;
    const Layout chunk_layout = fp32 ? Layout::kRaw : *layout;
    // 2^40 elements exceed any message; stop before the sum can overflow.
    if (elements[key] > (uint64_t{1} << 40)) {
      bytes = options_.max_message_bytes + 1;
      break;
    }
    bytes +=
        PayloadBytesBound(codec, chunk_layout, elements[key]) + kChunkFraming;
    if (bytes > options_.max_message_bytes) break;
  }
  if (bytes > options_.max_message_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "data center %d: a round's answer for this model (%d chunks) could "
        "take more than the GS's limit of %d MiB (--max_message_mb); raise "
        "--max_message_mb of the GS and the LPSs",
        request.datacenter, elements.size(), options_.max_message_bytes >> 20));
  }
  return absl::OkStatus();
}

absl::Status RoundAggregator::Configure(const RegisterRequest& request) {
  const Layout layout =
      *UpdateLayout(request.update_codec, request.update_layout);
  // clip = 0: the GS's TernGrad scaler is max|A_k|, so that the quantized
  // answer is unbiased (clipping the average would bias it).
  kernels::CodecOptions codec_options;
  codec_options.id = request.update_codec;
  codec_options.clip = 0.0f;
  codec_options.push_layout = layout;
  absl::StatusOr<std::unique_ptr<kernels::Codec>> update_codec =
      kernels::MakeCodec(codec_options);
  if (!update_codec.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("data center ", request.datacenter,
                     ": update codec: ", update_codec.status().message()));
  }
  kernels::CodecOptions fp32_options;
  fp32_options.id = CodecId::kFp32;
  fp32_options.push_layout = Layout::kRaw;
  fp32_options.pull_layout = Layout::kRaw;
  absl::StatusOr<std::unique_ptr<kernels::Codec>> fp32_codec =
      kernels::MakeCodec(fp32_options);
  if (!fp32_codec.ok()) return fp32_codec.status();

  std::vector<ChunkSpec> chunks(request.chunk_elements.size());
  for (size_t key = 0; key < chunks.size(); ++key) {
    ChunkSpec& chunk = chunks[key];
    chunk.num_elements = request.chunk_elements[key];
    chunk.codec = request.update_codec;
    chunk.layout = layout;
    chunk.kernel = update_codec->get();
  }
  for (const uint32_t key : request.fp32_chunk_keys) {
    chunks[key].codec = CodecId::kFp32;
    chunks[key].layout = Layout::kRaw;
    chunks[key].kernel = fp32_codec->get();
  }

  configured_ = true;
  first_datacenter_ = request.datacenter;
  config_ = request;
  config_.update_layout = layout;
  update_codec_ = *std::move(update_codec);
  fp32_codec_ = *std::move(fp32_codec);
  chunks_ = std::move(chunks);
  uint64_t total = 0;
  for (const uint64_t elements : request.chunk_elements) total += elements;
  logger_->info(
      "model configured by data center {}: {} chunks of {} elements, "
      "updates in {} {} ({} chunks in fp32), {} data centers",
      request.datacenter, chunks_.size(), total,
      kernels::CodecName(request.update_codec), kernels::LayoutName(layout),
      request.fp32_chunk_keys.size(), options_.num_datacenters);
  return absl::OkStatus();
}

absl::Status RoundAggregator::CompareWithFirst(
    const RegisterRequest& request) const {
  const uint32_t d = request.datacenter;
  auto differs = [&](absl::string_view what, const std::string& theirs,
                     const std::string& ours, absl::string_view why) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, " ", theirs, " of data center ", d, " differs from ",
                     ours, " of data center ", first_datacenter_, ": ", why));
  };
  constexpr absl::string_view kSameModel =
      "every data center must train the same model";
  constexpr absl::string_view kSameEncoding =
      "every data center must send its updates the same way";
  if (request.param_spec_hash != config_.param_spec_hash) {
    return differs("param spec hash", FormatChecksum(request.param_spec_hash),
                   FormatChecksum(config_.param_spec_hash), kSameModel);
  }
  if (request.chunk_elements.size() != config_.chunk_elements.size()) {
    return differs("chunk count", absl::StrCat(request.chunk_elements.size()),
                   absl::StrCat(config_.chunk_elements.size()),
                   "every data center must cut the model the same way "
                   "(same model and --partition_bytes)");
  }
  for (size_t key = 0; key < config_.chunk_elements.size(); ++key) {
    if (request.chunk_elements[key] != config_.chunk_elements[key]) {
      return absl::FailedPreconditionError(absl::StrCat(
          "chunk ", key, " has ", request.chunk_elements[key],
          " elements at data center ", d, ", but ", config_.chunk_elements[key],
          " at data center ", first_datacenter_,
          ": every data center must cut the model the same way (same model "
          "and --partition_bytes)"));
    }
  }
  if (request.update_codec != config_.update_codec) {
    return differs("update codec", kernels::CodecName(request.update_codec),
                   kernels::CodecName(config_.update_codec), kSameEncoding);
  }
  // Checked by CheckRegisterOptions already.
  const Layout layout =
      *UpdateLayout(request.update_codec, request.update_layout);
  if (layout != config_.update_layout) {
    return differs("update layout", kernels::LayoutName(layout),
                   kernels::LayoutName(config_.update_layout), kSameEncoding);
  }
  if (request.fp32_chunk_keys != config_.fp32_chunk_keys) {
    return differs(
        "fp32 chunk keys",
        absl::StrCat("[", absl::StrJoin(request.fp32_chunk_keys, ","), "]"),
        absl::StrCat("[", absl::StrJoin(config_.fp32_chunk_keys, ","), "]"),
        kSameEncoding);
  }
  // A data center that has sent no round yet must start from the initial
  // weights; one that has moved on is kept together by the rounds.
  if (next_round_[d] == 0 && request.param_checksum != config_.param_checksum) {
    return differs("param checksum", FormatChecksum(request.param_checksum),
                   FormatChecksum(config_.param_checksum),
                   "every data center must start from the same parameters "
                   "(same --seed and model)");
  }
  return absl::OkStatus();
}

absl::StatusOr<RegisterReply> RoundAggregator::Register(
    const RegisterRequest& request) {
  absl::MutexLock lock(&mu_);
  const uint32_t d = request.datacenter;
  absl::Status status = !closed_.ok() ? closed_ : failed_;
  if (status.ok()) status = CheckRegisterOptions(request);
  if (status.ok()) {
    status = configured_ ? CompareWithFirst(request) : Configure(request);
  }
  if (!status.ok()) {
    ++stats_.refused;
    logger_->warn("registration of data center {} refused: {}", d,
                  std::string(status.message()));
    return status;
  }
  if (!registered_[d]) {
    registered_[d] = true;
    const auto count = std::count(registered_.begin(), registered_.end(), true);
    logger_->info(
        "data center {} registered ({} of {}); it sends round {} "
        "next, the GS is at round {}",
        d, count, options_.num_datacenters, next_round_[d], open_round_);
  } else {
    logger_->info(
        "data center {} registered again (a rejoin): it sends "
        "round {} next, the GS is at round {}",
        d, next_round_[d], open_round_);
  }
  RegisterReply reply;
  reply.next_round = next_round_[d];
  reply.t_global_s = absl::ToDoubleSeconds(options_.t_global);
  reply.hold_timeout_s = absl::ToDoubleSeconds(options_.hold_timeout);
  reply.max_lag = options_.max_lag;
  return reply;
}

// --- SyncRound ---

absl::StatusOr<RoundAggregator::Decoded> RoundAggregator::Decode(
    const SyncRequest& request, const std::vector<const ChunkSpec*>& specs,
    const kernels::Codec* fp32) const {
  Decoded decoded;
  decoded.chunks.reserve(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const uint32_t key = request.updates[i].chunk_key;
    const kernels::Payload& update = request.updates[i].payload;
    // An LPS's final synchronization sends every chunk exactly, in fp32
    // RAW, whatever the registered update codec (server/WEIGHTGRAD.md); the
    // chunk's average is then answered in fp32 too (CloseRound).
    ChunkSpec exact_spec;
    const bool exact = update.codec == kernels::CodecId::kFp32 &&
                       update.layout == kernels::Layout::kRaw &&
                       specs[i]->codec != kernels::CodecId::kFp32;
    if (exact) {
      exact_spec = *specs[i];
      exact_spec.codec = kernels::CodecId::kFp32;
      exact_spec.layout = kernels::Layout::kRaw;
      exact_spec.kernel = fp32;
      decoded.exact.push_back(key);
    }
    const ChunkSpec& spec = exact ? exact_spec : *specs[i];
    auto invalid = [&](const std::string& what) {
      return absl::InvalidArgumentError(
          absl::StrCat("round ", request.round, ": chunk ", key,
                       " of data center ", request.datacenter, ": ", what));
    };
    if (update.codec != spec.codec) {
      return invalid(absl::StrCat("codec ", kernels::CodecName(update.codec),
                                  ", but the chunk's updates travel as ",
                                  kernels::CodecName(spec.codec)));
    }
    if (update.layout != spec.layout) {
      return invalid(absl::StrCat("layout ", kernels::LayoutName(update.layout),
                                  ", but the chunk's updates travel in ",
                                  kernels::LayoutName(spec.layout)));
    }
    if (update.format_version != kernels::kFormatVersion) {
      return invalid(absl::StrCat("format version ", update.format_version,
                                  " is not supported (the GS reads ",
                                  kernels::kFormatVersion, ")"));
    }
    if (update.num_elements != spec.num_elements) {
      return invalid(absl::StrCat(update.num_elements,
                                  " elements, but the chunk has ",
                                  spec.num_elements));
    }
    if (update.num_summands != 1) {
      return invalid(absl::StrCat("num_summands ", update.num_summands,
                                  ", but an update holds one data center's "
                                  "values"));
    }
    for (const float scaler : update.scalers) {
      if (!std::isfinite(scaler)) {
        return invalid(
            absl::StrCat("scaler ", scaler,
                         " is not finite (NaN/Inf updates are refused; see "
                         "global/README.md)"));
      }
    }
    std::vector<float> values(spec.num_elements);
    const absl::Status status =
        spec.kernel->Decode(update, absl::MakeSpan(values));
    if (!status.ok()) return invalid(std::string(status.message()));
    for (size_t j = 0; j < values.size(); ++j) {
      if (!std::isfinite(values[j])) {
        return invalid(absl::StrCat(
            "element ", j, " is ", values[j],
            " (NaN/Inf updates are refused; see global/README.md)"));
      }
    }
    decoded.bytes += update.data.size() + update.scalers.size() * sizeof(float);
    decoded.chunks.emplace_back(key, std::move(values));
  }
  return decoded;
}

void RoundAggregator::SyncRound(const SyncRequest& request, SyncCallback done) {
  const uint32_t d = request.datacenter;
  const uint64_t round = request.round;
  auto log_refusal = [&](const absl::Status& status) {
    logger_->warn("round {} of data center {} refused: {}", round, d,
                  std::string(status.message()));
  };

  // 1. Under the lock: is this request expected, and which chunks are they?
  std::vector<const ChunkSpec*> specs(request.updates.size(), nullptr);
  const kernels::Codec* fp32 = nullptr;
  {
    Deferred deferred;
    absl::MutexLock lock(&mu_);
    auto refuse = [&](absl::Status status) {
      ++stats_.refused;
      log_refusal(status);
      deferred.Answer(std::move(done), std::move(status));
    };
    if (!closed_.ok()) return refuse(closed_);
    if (!failed_.ok()) return refuse(failed_);
    const uint32_t k = options_.num_datacenters;
    if (d >= k) {
      return refuse(absl::InvalidArgumentError(
          absl::StrCat("unknown data center ", d, ": the GS serves 0..", k - 1,
                       " (--num_datacenters=", k, ")")));
    }
    if (!registered_[d]) {
      return refuse(absl::FailedPreconditionError(absl::StrCat(
          "data center ", d, " has not registered (Register comes first)")));
    }
    if (round > open_round_) {
      return refuse(absl::FailedPreconditionError(
          absl::StrCat("round ", round, " of data center ", d,
                       " is in the future: the GS is at round ", open_round_)));
    }
    const auto stored = answers_.find(round);
    if (round < next_round_[d]) {
      // A retry of a round already counted: counted once, answered alike.
      ++stats_.duplicates;
      if (round == open_round_) {
        // While the round is held, this call's own hold begins now.
        std::optional<absl::Time> held_since;
        if (hold_began_.has_value()) held_since = options_.clock();
        waiters_.push_back(Waiter{d, held_since, std::move(done)});
        return;
      }
      if (stored == answers_.end()) {
        return refuse(absl::FailedPreconditionError(absl::StrCat(
            "round ", round, " of data center ", d,
            " is no longer kept: the GS keeps the answers of the last ",
            options_.max_lag + 1, " rounds (--max_lag=", options_.max_lag,
            ") and is at round ", open_round_)));
      }
      deferred.Answer(std::move(done), stored->second);
      return;
    }
    if (round > next_round_[d]) {
      return refuse(absl::FailedPreconditionError(
          absl::StrCat("data center ", d, " sent round ", round,
                       ", but its next round is ", next_round_[d],
                       " (rounds are sent in order; Register tells the "
                       "next one)")));
    }
    if (round < open_round_ && stored == answers_.end()) {
      return refuse(absl::FailedPreconditionError(absl::StrCat(
          "round ", round, " of data center ", d,
          " is no longer kept: the GS is at round ", open_round_)));
    }
    if (adding_[d]) {
      // The first copy is still being decoded; a retry finds it counted.
      return refuse(absl::UnavailableError(
          absl::StrCat("round ", round, ": an earlier request of data center ",
                       d, " is still being added; retry")));
    }
    absl::flat_hash_set<uint32_t> seen;
    for (size_t i = 0; i < request.updates.size(); ++i) {
      const uint32_t key = request.updates[i].chunk_key;
      auto invalid = [&](absl::string_view what) {
        return absl::InvalidArgumentError(absl::StrCat(
            "round ", round, ": chunk ", key, " of data center ", d, what));
      };
      if (key >= chunks_.size()) {
        return refuse(invalid(absl::StrCat(" is not a chunk of the model (",
                                           chunks_.size(), " chunks)")));
      }
      if (!seen.insert(key).second) return refuse(invalid(" appears twice"));
      specs[i] = &chunks_[key];
      fp32 = fp32_codec_.get();
    }
    adding_[d] = true;
  }

  // 2. Without the lock: validate and decode every update.
  absl::StatusOr<Decoded> decoded = Decode(request, specs, fp32);

  // 3. Under the lock: add the updates to the round open now.
  Deferred deferred;
  absl::MutexLock lock(&mu_);
  adding_[d] = false;
  if (!decoded.ok()) {
    ++stats_.refused;
    log_refusal(decoded.status());
    deferred.Answer(std::move(done), decoded.status());
    return;
  }
  if (absl::Status serving = !closed_.ok() ? closed_ : failed_; !serving.ok()) {
    deferred.Answer(std::move(done), serving);
    return;
  }
  const absl::Time now = options_.clock();
  // The round may have closed while the updates were decoded: then they
  // are late, like any request for a closed round.
  const bool late = round < open_round_;
  RoundAnswerPtr stored;
  if (late) {
    const auto it = answers_.find(round);
    if (it == answers_.end()) {
      // Not reachable while holds bound the lag; refused rather than added
      // without an answer to give.
      ++stats_.refused;
      deferred.Answer(
          std::move(done),
          absl::FailedPreconditionError(absl::StrCat(
              "round ", round, " of data center ", d,
              " is no longer kept: the GS is at round ", open_round_)));
      return;
    }
    stored = it->second;
  }

  std::map<uint32_t, std::vector<float>>& sums = sums_[d];
  for (auto& [key, values] : decoded->chunks) {
    auto [it, inserted] = sums.try_emplace(key, std::move(values));
    if (!inserted) {
      std::vector<float>& sum = it->second;
      for (size_t j = 0; j < sum.size(); ++j) sum[j] += values[j];
    }
  }
  exact_chunks_.insert(decoded->exact.begin(), decoded->exact.end());
  contributions_.push_back(Contribution{d, round});
  round_bytes_in_ += decoded->bytes;
  stats_.bytes_in += decoded->bytes;
  next_round_[d] = round + 1;

  if (late) {
    ++stats_.late_submissions;
    logger_->info(
        "data center {} sent round {} late: answered with the stored "
        "average; its updates join round {}",
        d, round, open_round_);
    deferred.Answer(std::move(done), std::move(stored));
  } else {
    sent_[d] = true;
    ++num_sent_;
    if (!first_arrival_.has_value()) first_arrival_ = now;
    std::optional<absl::Time> held_since;
    if (hold_began_.has_value()) held_since = now;
    waiters_.push_back(Waiter{d, held_since, std::move(done)});
  }
  // All K may have sent now, or a lagging data center may have caught up
  // enough to release a hold.
  MaybeClose(now, &deferred);
}

// --- closing rounds ---

std::vector<uint32_t> RoundAggregator::TooFarBehind() const {
  std::vector<uint32_t> behind;
  for (uint32_t d = 0; d < options_.num_datacenters; ++d) {
    if (!sent_[d] && open_round_ - next_round_[d] > options_.max_lag) {
      behind.push_back(d);
    }
  }
  return behind;
}

std::string RoundAggregator::DescribeLag(
    const std::vector<uint32_t>& datacenters) const {
  std::vector<std::string> parts;
  const size_t named = std::min(datacenters.size(), kMaxNamed);
  for (size_t i = 0; i < named; ++i) {
    const uint32_t d = datacenters[i];
    parts.push_back(registered_[d]
                        ? absl::StrCat(d, " (at round ", next_round_[d], ")")
                        : absl::StrCat(d, " (not registered)"));
  }
  if (named < datacenters.size()) {
    parts.push_back(absl::StrCat("and ", datacenters.size() - named, " more"));
  }
  return absl::StrCat(
      datacenters.size() == 1 ? "data center " : "data centers ",
      absl::StrJoin(parts, ", "));
}

void RoundAggregator::MaybeClose(absl::Time now, Deferred* deferred) {
  if (!closed_.ok() || !failed_.ok()) return;
  if (num_sent_ == options_.num_datacenters) {
    CloseRound(now, deferred);
    return;
  }
  if (!first_arrival_.has_value() ||
      now < *first_arrival_ + options_.t_global) {
    return;
  }
  const std::vector<uint32_t> behind = TooFarBehind();
  if (behind.empty()) {
    CloseRound(now, deferred);
    return;
  }
  if (hold_began_.has_value()) return;
  hold_began_ = now;
  ++stats_.holds;
  for (Waiter& waiter : waiters_) waiter.held_since = now;
  logger_->warn(
      "round {} held: {} {} more than --max_lag={} rounds behind; the "
      "others' answers wait (at most {} each)",
      open_round_, DescribeLag(behind), behind.size() == 1 ? "lags" : "lag",
      options_.max_lag, Seconds(options_.hold_timeout));
}

absl::StatusOr<kernels::Payload> RoundAggregator::EncodeAverage(
    uint32_t key, const ChunkSpec& spec, std::vector<float> average) const {
  kernels::EncodeContext context;
  // Every LPS gets the same bytes: the draws depend only on (seed, round,
  // chunk). Rounds wrap at 2^32 in the stream, far beyond any run.
  context.stream =
      RandomStream{options_.seed, static_cast<uint32_t>(open_round_), key,
                   kGlobalStreamWorker};
  context.scaler = 0.0f;  // the GS's own scaler, from A itself
  return spec.kernel->Encode(average, context);
}

void RoundAggregator::CloseRound(absl::Time now, Deferred* deferred) {
  const uint32_t k = options_.num_datacenters;
  // A = (1/K) * sum_d U_d, summed in data-center order (each data center's
  // own updates already in round order), so the bytes are reproducible.
  std::map<uint32_t, std::vector<float>> total;
  for (uint32_t d = 0; d < k; ++d) {
    for (auto& [key, values] : sums_[d]) {
      auto [it, inserted] = total.try_emplace(key, std::move(values));
      if (!inserted) {
        std::vector<float>& sum = it->second;
        for (size_t j = 0; j < sum.size(); ++j) sum[j] += values[j];
      }
    }
    sums_[d].clear();
  }
  const absl::flat_hash_set<uint32_t> exact = std::move(exact_chunks_);
  exact_chunks_.clear();

  auto answer = std::make_shared<RoundAnswer>();
  answer->round = open_round_;
  uint64_t bytes_out = 0;
  for (auto& [key, sum] : total) {
    const float divisor = static_cast<float>(k);
    for (size_t j = 0; j < sum.size(); ++j) {
      sum[j] /= divisor;
      if (!std::isfinite(sum[j])) {
        FailRun(absl::InternalError(absl::StrCat(
                    "round ", open_round_, ": chunk ", key, ": element ", j,
                    " of the average overflowed float32 (", sum[j], ")")),
                deferred);
        return;
      }
    }
    ChunkSpec spec = chunks_[key];
    if (exact.contains(key)) {
      spec.codec = kernels::CodecId::kFp32;
      spec.layout = kernels::Layout::kRaw;
      spec.kernel = fp32_codec_.get();
    }
    absl::StatusOr<kernels::Payload> payload =
        EncodeAverage(key, spec, std::move(sum));
    if (!payload.ok()) {
      FailRun(absl::InternalError(
                  absl::StrCat("round ", open_round_, ": chunk ", key,
                               ": the average could not be encoded: ",
                               payload.status().message())),
              deferred);
      return;
    }
    bytes_out += payload->data.size() + payload->scalers.size() * sizeof(float);
    answer->average.push_back(ChunkPayload{key, *std::move(payload)});
  }
  for (uint32_t d = 0; d < k; ++d) {
    if (!sent_[d]) answer->lagging.push_back(d);
  }
  answer->contributions = std::move(contributions_);
  std::sort(answer->contributions.begin(), answer->contributions.end(),
            [](const Contribution& a, const Contribution& b) {
              return std::pair(a.datacenter, a.round) <
                     std::pair(b.datacenter, b.round);
            });

  const absl::Duration open_for =
      first_arrival_.has_value() ? now - *first_arrival_ : absl::ZeroDuration();
  std::string held;
  if (hold_began_.has_value()) {
    held = absl::StrCat(", held ", Seconds(now - *hold_began_));
  }
  const size_t late = std::count_if(
      answer->contributions.begin(), answer->contributions.end(),
      [&](const Contribution& c) { return c.round != open_round_; });
  logger_->info(
      "round {} closed after {}: {} of {} data centers sent it, {} late "
      "update(s) joined, lagging [{}]{}, {} chunks averaged, {} bytes in, {} "
      "bytes out",
      open_round_, Seconds(open_for), num_sent_, k, late,
      absl::StrJoin(answer->lagging, ","), held, answer->average.size(),
      round_bytes_in_, bytes_out);
  ++stats_.rounds_closed;
  stats_.bytes_out += bytes_out;

  RoundAnswerPtr shared = std::move(answer);
  for (Waiter& waiter : waiters_) {
    deferred->Answer(std::move(waiter.done), shared);
  }
  waiters_.clear();
  answers_[open_round_] = std::move(shared);
  while (answers_.size() > static_cast<size_t>(options_.max_lag) + 1) {
    answers_.erase(answers_.begin());
  }

  ++open_round_;
  first_arrival_.reset();
  hold_began_.reset();
  std::fill(sent_.begin(), sent_.end(), false);
  num_sent_ = 0;
  contributions_.clear();
  round_bytes_in_ = 0;
}

// --- timeouts, failure, shutdown ---

void RoundAggregator::Tick(absl::Time now) {
  Deferred deferred;
  absl::MutexLock lock(&mu_);
  MaybeClose(now, &deferred);
  if (!hold_began_.has_value()) return;
  const std::vector<uint32_t> behind = TooFarBehind();
  const absl::Status status = absl::UnavailableError(absl::StrCat(
      "round ", open_round_, " is held: ", DescribeLag(behind),
      behind.size() == 1 ? " lags" : " lag",
      " more than --max_lag=", options_.max_lag, " rounds behind; retry"));
  std::vector<Waiter> kept;
  size_t expired = 0;
  for (Waiter& waiter : waiters_) {
    if (waiter.held_since.has_value() &&
        now - *waiter.held_since >= options_.hold_timeout) {
      deferred.Answer(std::move(waiter.done), status);
      ++expired;
    } else {
      kept.push_back(std::move(waiter));
    }
  }
  waiters_ = std::move(kept);
  if (expired > 0) {
    stats_.hold_timeouts += expired;
    logger_->warn("{} ({} held {} answered after {})",
                  std::string(status.message()), expired,
                  expired == 1 ? "call" : "calls",
                  Seconds(options_.hold_timeout));
  }
}

void RoundAggregator::AnswerAll(const absl::Status& status,
                                Deferred* deferred) {
  for (Waiter& waiter : waiters_) {
    deferred->Answer(std::move(waiter.done), status);
  }
  waiters_.clear();
}

void RoundAggregator::FailRun(absl::Status status, Deferred* deferred) {
  if (!failed_.ok()) return;
  failed_ = std::move(status);
  logger_->error("run failed: {}", std::string(failed_.message()));
  AnswerAll(failed_, deferred);
}

void RoundAggregator::Close(absl::Status status) {
  Deferred deferred;
  absl::MutexLock lock(&mu_);
  if (!closed_.ok()) return;
  closed_ = std::move(status);
  logger_->info("closing at round {}: {}", open_round_,
                std::string(closed_.message()));
  AnswerAll(closed_, &deferred);
}

uint64_t RoundAggregator::open_round() const {
  absl::MutexLock lock(&mu_);
  return open_round_;
}

bool RoundAggregator::holding() const {
  absl::MutexLock lock(&mu_);
  return hold_began_.has_value();
}

RoundStats RoundAggregator::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

absl::Status RoundAggregator::run_status() const {
  absl::MutexLock lock(&mu_);
  return failed_;
}

}  // namespace tern::global
