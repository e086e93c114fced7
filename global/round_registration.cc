// Registration: the first data center fixes the model and the update
// encoding; every later one (or a rejoin) is compared with it.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/checksum.h"
#include "core/join_check.h"
#include "global/round_aggregator.h"
#include "kernels/codec_options.h"
#include "kernels/codec_registry.h"

namespace tern::global {
namespace {

using kernels::CodecId;
using kernels::Layout;

constexpr absl::string_view kSameModel =
    "every data center must train the same model";
constexpr absl::string_view kSameCut =
    "every data center must cut the model the same way (same model and "
    "--partition_bytes)";
constexpr absl::string_view kSameEncoding =
    "every data center must send its updates the same way";

// INVALID_ARGUMENT unless `keys` are strictly ascending chunk keys of a
// model of `num_chunks` chunks.
absl::Status CheckFp32Keys(uint32_t datacenter,
                           const std::vector<uint32_t>& keys,
                           size_t num_chunks) {
  for (size_t i = 0; i < keys.size(); ++i) {
    if (keys[i] >= num_chunks) {
      return absl::InvalidArgumentError(absl::StrCat(
          "data center ", datacenter, ": fp32 chunk key ", keys[i],
          " is beyond the model's ", num_chunks, " chunks"));
    }
    if (i > 0 && keys[i] <= keys[i - 1]) {
      return absl::InvalidArgumentError(
          absl::StrCat("data center ", datacenter,
                       ": fp32 chunk keys are not strictly ascending (",
                       keys[i], " after ", keys[i - 1], ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<kernels::Codec>> MakeFp32Codec() {
  kernels::CodecOptions options;
  options.id = CodecId::kFp32;
  options.push_layout = Layout::kRaw;
  options.pull_layout = Layout::kRaw;
  return kernels::MakeCodec(options);
}

}  // namespace

absl::Status RoundAggregator::CheckRegisterOptions(
    const RegisterRequest& request) const {
  const uint32_t k = options_.num_datacenters;
  const uint32_t d = request.datacenter;
  if (d >= k) {
    return absl::InvalidArgumentError(absl::StrCat(
        "datacenter ", d, " is not below --num_datacenters=", k, " of the GS"));
  }
  if (request.num_datacenters != k) {
    return absl::InvalidArgumentError(
        absl::StrCat("data center ", d, " runs with num_datacenters=",
                     request.num_datacenters,
                     ", but the GS was started with --num_datacenters=", k));
  }
  absl::StatusOr<Layout> layout =
      UpdateLayout(request.update_codec, request.update_layout);
  if (!layout.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("data center ", d, ": ", layout.status().message()));
  }
  if (absl::Status status = CheckFp32Keys(d, request.fp32_chunk_keys,
                                          request.chunk_elements.size());
      !status.ok()) {
    return status;
  }
  if (std::all_of(request.chunk_elements.begin(), request.chunk_elements.end(),
                  [](uint64_t elements) { return elements == 0; })) {
    // An LPS never registers one (its workers' joins are refused first);
    // a registration that did would fix a model no data center could sync.
    return absl::InvalidArgumentError(
        absl::StrCat("data center ", d,
                     " registers a model of 0 elements: there is nothing to "
                     "average"));
  }
  if (!AnswerFits(request.chunk_elements, request.fp32_chunk_keys,
                  request.update_codec, *layout, options_.max_message_bytes)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "data center %d: a round's answer for this model (%d chunks) could "
        "take more than the GS's limit of %d MiB (--max_message_mb); raise "
        "--max_message_mb of the GS and the LPSs",
        d, request.chunk_elements.size(), options_.max_message_bytes >> 20));
  }
  return absl::OkStatus();
}

absl::Status RoundAggregator::Configure(const RegisterRequest& request) {
  // Checked by CheckRegisterOptions already.
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
  absl::StatusOr<std::unique_ptr<kernels::Codec>> fp32_codec = MakeFp32Codec();
  if (!fp32_codec.ok()) return fp32_codec.status();

  std::vector<ChunkSpec> chunks(request.chunk_elements.size());
  for (size_t key = 0; key < chunks.size(); ++key) {
    chunks[key] = ChunkSpec{request.chunk_elements[key], request.update_codec,
                            layout, update_codec->get()};
  }
  for (const uint32_t key : request.fp32_chunk_keys) {
    chunks[key] = ChunkSpec{request.chunk_elements[key], CodecId::kFp32,
                            Layout::kRaw, fp32_codec->get()};
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
  core::JoinComparison model(absl::StrCat("data center ", d),
                             absl::StrCat("data center ", first_datacenter_));
  model
      .Texts(request.param_spec_hash == config_.param_spec_hash,
             "param spec hash", FormatChecksum(request.param_spec_hash),
             FormatChecksum(config_.param_spec_hash), kSameModel)
      .Field("chunk count", request.chunk_elements.size(),
             config_.chunk_elements.size(), kSameCut);
  if (!model.ok()) return model.status();
  // Same count: name the chunk that differs and both sizes.
  for (size_t key = 0; key < config_.chunk_elements.size(); ++key) {
    if (request.chunk_elements[key] != config_.chunk_elements[key]) {
      return absl::FailedPreconditionError(absl::StrCat(
          "chunk ", key, " has ", request.chunk_elements[key],
          " elements at data center ", d, ", but ", config_.chunk_elements[key],
          " at data center ", first_datacenter_, ": ", kSameCut));
    }
  }
  // Checked by CheckRegisterOptions already.
  const Layout layout =
      *UpdateLayout(request.update_codec, request.update_layout);
  auto keys = [](const std::vector<uint32_t>& keys) {
    return absl::StrCat("[", absl::StrJoin(keys, ","), "]");
  };
  model
      .Texts(request.update_codec == config_.update_codec, "update codec",
             kernels::CodecName(request.update_codec),
             kernels::CodecName(config_.update_codec), kSameEncoding)
      .Texts(layout == config_.update_layout, "update layout",
             kernels::LayoutName(layout),
             kernels::LayoutName(config_.update_layout), kSameEncoding)
      .Texts(request.fp32_chunk_keys == config_.fp32_chunk_keys,
             "fp32 chunk keys", keys(request.fp32_chunk_keys),
             keys(config_.fp32_chunk_keys), kSameEncoding)
      // A data center that has sent no round yet must start from the
      // initial weights; one that has moved on is kept together by the
      // rounds.
      .Texts(next_round_[d] != 0 ||
                 request.param_checksum == config_.param_checksum,
             "param checksum", FormatChecksum(request.param_checksum),
             FormatChecksum(config_.param_checksum),
             "every data center must start from the same parameters "
             "(same --seed and model)");
  return model.status();
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
    LogRefusal(d, "registration", status,
               "registration of data center {} refused: {}", d,
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
    // Before the reply: a restarted GS must know the data center.
    SaveState();
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

}  // namespace tern::global
