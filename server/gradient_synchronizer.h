// The WAN side of a WeightGrad LPS shard (DESIGN section 4; Akter & Adnan,
// KDD 2020, section 3 and Appendix A.2), as a plain class over an LpsState:
// no protobuf, no gRPC. server/WEIGHTGRAD.md explains the significance test
// and the threshold schedule and why they read the paper the way they do.
//
// Per chunk k it keeps W_last_k (the weights at the last global round), the
// path length of the open round's steps, and (until the dynamic threshold
// is set) the round's gradient sum. Every `sync_every` local steps, round r:
//   BuildRound(r): U_k = W_k - W_last_k (less what earlier rounds sent and
//     the GS has not answered yet). Chunks whose significance (how
//     coherently the chunk moved since it was last sent) reaches G_thresh
//     are encoded (ternary: TernGrad with the chunk's own scaler;
//     fp32: U_k whole; gaia: the elements with |U_j| >= 1% |W_j|) and
//     listed in the request; the rest stay in U. An empty request is still
//     sent: it is the heartbeat. U_sent_k = Decode(payload) is remembered.
//   ApplyAnswer(r, A): for every chunk of the GS's average A,
//     W_k += A_k - U_sent_k and W_last_k += A_k, so every data center's
//     W_last moves to the same model and U_k - U_sent_k (what the encoding
//     or the threshold held back) stays in U for the next round: error
//     feedback.
// Rounds are answered in order; several may wait for an answer at once
// (the GS holds answers while some LPS lags, DESIGN section 4), each
// remembering its own U_sent.
//
// Every gradient the LPS applies goes through ApplyGradient here, which
// applies it to the LpsState and adds it to the round's statistics.
//
// Thread safety: thread-compatible, like LpsState (the LPS service holds
// one mutex around both).
#ifndef TERN_SERVER_GRADIENT_SYNCHRONIZER_H_
#define TERN_SERVER_GRADIENT_SYNCHRONIZER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "kernels/codec.h"
#include "server/lps_state.h"
#include "server/messages.h"

namespace tern::server {

// The `worker` of the RandomStream U is ternarized with:
// (seed, round, chunk, kSyncStreamWorker). No worker and no PS shard
// (kernels::kShardStreamWorker = 0xFFFFFFFF) draws from it.
inline constexpr uint32_t kSyncStreamWorker = 0xFFFFFFFEu;

enum class SyncMode {
  // WeightGrad: significant chunks of U, ternarized with their own scaler.
  kTernary,
  // Significant chunks of U in fp32, exact (tests, and a lossless WAN).
  kFp32,
  // Gaia (Hsieh et al., NSDI 2017): no chunk threshold; the elements with
  // |U_j| / |W_j| >= gaia_threshold travel in fp32.
  kGaia,
};

// "ternary", "fp32" or "gaia"; INVALID_ARGUMENT otherwise.
absl::StatusOr<SyncMode> ParseSyncMode(absl::string_view name);

struct SynchronizerOptions {
  SyncMode mode = SyncMode::kTernary;
  // Local steps per round (--sync_every), >= 1.
  uint64_t sync_every = 10;
  // --g_thresh: a fixed significance threshold (>= 0). Unset: the dynamic
  // threshold of Appendix A.2 (server/WEIGHTGRAD.md).
  std::optional<double> g_thresh;
  // Local steps per epoch: at each multiple of it the dynamic threshold is
  // multiplied by the LR ratio and the momentum-norm ratio. 0: never. The
  // LPS takes it from `tern ps --steps_per_epoch`, else from the workers'
  // join (OptimizerConfig.steps_per_epoch).
  uint64_t steps_per_epoch = 0;
  // Ternary encoding of U: TernGrad's clipping at clip * sigma (0 disables
  // it) and layout (TERNARY_2BIT or TERNARY_BASE3). 2, not TernGrad's 2.5:
  // with error feedback the residual U - U_sent must shrink under
  // re-encoding, and stochastic ternary only does that for a scaler below
  // 2 ||U||^2 / ||U||_1 (2.5 sigma for a Gaussian U, 2.3 sigma for a
  // uniform one); at 2.5 the residual grows to ~15 rounds' worth of
  // updates, at 2 it stays near 1.5 (server/WEIGHTGRAD.md).
  float clip = 2.0f;
  kernels::Layout ternary_layout = kernels::Layout::kTernary2Bit;
  // The run's seed, for the ternarization's random stream.
  uint64_t seed = 0;
  // The gaia mode's element-wise significance |U_j| / |W_j| (> 0).
  double gaia_threshold = 0.01;
  // The number of the first round (RegisterResponse.next_round).
  uint64_t first_round = 0;
  // --sync_timeout: how long the GS may stay silent while a round waits for
  // its answer before MustHold says to hold the workers.
  absl::Duration sync_timeout = absl::Seconds(60);
  // Where "now" comes from for send and answer times; tests pass a fake.
  std::function<absl::Time()> clock = [] { return absl::Now(); };
};

// What BuildRound decided for one chunk.
struct ChunkDecision {
  uint32_t key = 0;
  // ternary / fp32: ||U_k - H_k||_2 / path_k (server/WEIGHTGRAD.md), H_k
  // the part of U_k the chunk's last ternary send held back; 0 when the
  // chunk has not moved since or no gradient stepped it this round. gaia:
  // the fraction of the chunk's elements that were significant.
  double significance = 0;
  bool sent = false;
};

// A rescale of the dynamic threshold at an epoch boundary (Appendix A.2,
// eq. 13): G_thresh <- lr_ratio * momentum_ratio * G_thresh.
struct ThresholdRescale {
  // The epoch now begun (completed local steps / steps_per_epoch); several
  // epochs crossed in one round rescale once, to the last of them.
  uint64_t epoch = 0;
  // lr(first step of `epoch`) / lr(first step of the last rescale's epoch),
  // and ||v|| now / ||v|| then over the shard's momentum buffers; 1 where
  // the old value was 0 (left out).
  double lr_ratio = 1;
  double momentum_ratio = 1;
  double old_threshold = 0;
  double new_threshold = 0;
};

// One round's request to the GS.
struct SyncRound {
  uint64_t round = 0;
  // The LPS's completed local steps when the round was built.
  uint64_t local_step = 0;
  // The threshold the chunks were compared with (0 in the gaia mode).
  double g_thresh = 0;
  // Set when the dynamic threshold was rescaled for this round (an epoch
  // boundary passed since the last round).
  std::optional<ThresholdRescale> rescale;
  // The significant chunks' U, encoded, in key order. Empty: a heartbeat.
  std::vector<ChunkPayload> updates;
  // Every chunk of the shard, in key order.
  std::vector<ChunkDecision> decisions;
};

// What a restarted LPS needs of its synchronizer (server/lps_state_file.h):
// per chunk W_last, the open round's statistics and the ternary residual
// held back; the round counters, the rounds waiting for their answers with
// their U_sent, and the dynamic threshold's state.
struct SyncChunkSnapshot {
  uint32_t key = 0;
  std::vector<float> last_weights;
  std::vector<float> gradient_sum;
  uint64_t gradients = 0;
  double path = 0;
  std::vector<float> held_back;
};
struct WaitingRoundSnapshot {
  uint64_t round = 0;
  std::map<uint32_t, std::vector<float>> sent_updates;
};
struct SynchronizerSnapshot {
  std::vector<SyncChunkSnapshot> chunks;  // in key order
  uint64_t next_round = 0;
  uint64_t last_round_step = 0;
  std::vector<WaitingRoundSnapshot> waiting;  // oldest first
  std::optional<double> g_thresh;
  uint64_t threshold_epoch = 0;
  double threshold_lr = 0;
  double threshold_momentum_norm = 0;
};

class GradientSynchronizer {
 public:
  // `state` must outlive the synchronizer; W_last starts at its current
  // weights. INVALID_ARGUMENT for options that cannot work (sync_every 0,
  // a negative or non-finite g_thresh, clip or gaia_threshold, a bad
  // ternary layout, a timeout that is not positive, a null state).
  static absl::StatusOr<std::unique_ptr<GradientSynchronizer>> Create(
      SynchronizerOptions options, LpsState* state);

  // The synchronizer `snapshot` describes, over a `state` restored from the
  // same file. The waiting rounds count as sent now (MustHold measures the
  // GS's silence from the restart). INVALID_ARGUMENT naming what does not
  // fit the state: other chunk keys or lengths, a non-finite value, a
  // waiting round out of order or of a chunk the state does not have.
  static absl::StatusOr<std::unique_ptr<GradientSynchronizer>> Restore(
      SynchronizerOptions options, LpsState* state,
      SynchronizerSnapshot snapshot);
  SynchronizerSnapshot Snapshot() const;

  GradientSynchronizer(const GradientSynchronizer&) = delete;
  GradientSynchronizer& operator=(const GradientSynchronizer&) = delete;

  // LpsState::ApplyGradient, then (on success) adds lr_t / (1 - m) *
  // ||g||_2 to the chunk's path, and g to its gradient sum while the
  // dynamic threshold is not set yet.
  absl::StatusOr<ApplyResult> ApplyGradient(uint32_t worker, uint64_t step,
                                            uint32_t key,
                                            absl::Span<const float> gradient);

  // True once sync_every local steps have completed since the last round
  // (or since creation): BuildRound(next_round()) is due.
  bool RoundDue() const;

  // Builds round `round`. FAILED_PRECONDITION unless `round` is
  // next_round() and the round is due. Starts the next round's statistics;
  // the time of the call counts as the round's send time.
  absl::StatusOr<SyncRound> BuildRound(uint64_t round);

  // The final synchronization (server/WEIGHTGRAD.md): round `round` sends
  // every chunk's whole U in fp32 (exact, whatever the mode, no
  // threshold). Once its answer is applied, U_sent = U leaves no residual,
  // so W = W_last in every data center: the same bits everywhere (the GS
  // answers a chunk sent in fp32 in fp32). FAILED_PRECONDITION unless
  // `round` is next_round() and no round waits for its answer.
  absl::StatusOr<SyncRound> BuildFinalRound(uint64_t round);

  // Applies the GS's answer to round `round`: `average` holds A_k for
  // every chunk any data center sent (fp32, fp16, terngrad or int8
  // payloads). FAILED_PRECONDITION unless `round` is the oldest round
  // waiting for an answer. INVALID_ARGUMENT, with nothing applied, for a
  // chunk this shard does not own, a chunk given twice, a payload that does
  // not decode to the chunk's length, a non-finite value, a value, scaler
  // or resulting weight beyond the magnitude rule (|x| <= 1e30,
  // core/payload_validation.h), or a chunk this LPS sent in the round that
  // the answer lacks.
  absl::Status ApplyAnswer(uint64_t round,
                           absl::Span<const ChunkPayload> average);

  // True when a round waits for its answer and the GS has been silent for
  // sync_timeout: since that round was sent, or since the last answer when
  // that came later. The LPS then holds its workers' answers (bounded
  // divergence, DESIGN section 4) until ApplyAnswer.
  bool MustHold(absl::Time now) const;

  // When the last answer was applied; InfinitePast before the first.
  absl::Time last_answer_time() const { return last_answer_time_; }
  uint64_t next_round() const { return next_round_; }
  // Rounds sent and not answered yet.
  size_t rounds_waiting() const { return waiting_.size(); }
  // The current threshold: the fixed one, or the dynamic one once the
  // first round with a nonzero gradient has set it.
  std::optional<double> g_thresh() const { return g_thresh_; }
  // W_last of a chunk; INVALID_ARGUMENT for an unknown chunk. Valid while
  // the synchronizer lives.
  absl::StatusOr<absl::Span<const float>> LastRoundWeights(uint32_t key) const;

 private:
  struct ChunkSync {
    uint32_t key = 0;
    std::vector<float> last_weights;  // W_last
    // This round's gradient sum, kept only until the dynamic threshold is
    // set (NeedsMeanGradient).
    std::vector<float> gradient_sum;
    uint64_t gradients = 0;  // applied this round
    double path = 0;         // this round's sum of lr_t / (1 - m) * ||g_t||_2
    // Ternary mode: U - U_sent of the chunk's last send, the part of U that
    // is quantization error rather than movement. Empty: none.
    std::vector<float> held_back;
  };
  struct WaitingRound {
    uint64_t round = 0;
    absl::Time sent;
    // U_sent of the chunks sent, by key.
    std::map<uint32_t, std::vector<float>> sent_updates;
  };

  GradientSynchronizer(SynchronizerOptions options, LpsState* state,
                       std::unique_ptr<kernels::Codec> ternary,
                       std::unique_ptr<kernels::Codec> fp32);

  // Whether ApplyGradient keeps the gradient sum: only until the dynamic
  // threshold is set.
  bool NeedsMeanGradient() const;
  // U_k = (W_k - W_last_k) - the U_sent of every round waiting.
  std::vector<float> Update(const ChunkSync& chunk,
                            absl::Span<const float> weights) const;
  // Sets the dynamic threshold from this round's mean gradient, once.
  void InitThreshold();
  // Multiplies the dynamic threshold at epoch boundaries (A.2, eq. 13);
  // what it did, or nullopt when no boundary passed.
  std::optional<ThresholdRescale> RescaleThreshold();

  // BuildRound's pieces. FAILED_PRECONDITION unless `round` is next_round()
  // and due.
  absl::Status CheckRoundDue(uint64_t round) const;
  // Sets or rescales the dynamic threshold; returns what this round's
  // chunks are compared with (0 in the gaia mode and until a nonzero
  // gradient has set it: then every chunk that moved is significant), and
  // sets `rescale` when it rescaled.
  double RoundThreshold(std::optional<ThresholdRescale>* rescale);
  // Whether `chunk` travels this round, given its update U (gaia: zeroes
  // U's insignificant elements).
  ChunkDecision Decide(const ChunkSync& chunk, absl::Span<const float> weights,
                       double threshold, std::vector<float>* update) const;
  // Encodes a significant chunk's U for round `round`; `sent` gets U_sent,
  // the payload decoded as the GS will decode it.
  absl::StatusOr<kernels::Payload> EncodeUpdate(uint64_t round, uint32_t key,
                                                absl::Span<const float> update,
                                                std::vector<float>* sent) const;
  // Nothing failed: stores the ternary residuals held back (chunk index,
  // residual), queues `waiting` for its answer and starts the next round's
  // statistics.
  void CommitRound(std::vector<std::pair<size_t, std::vector<float>>> held_back,
                   WaitingRound waiting);
  absl::StatusOr<const kernels::Codec*> AnswerCodec(kernels::CodecId id) const;
  // One chunk (chunks_[index]) of the GS's answer to `waiting`, decoded
  // and checked: finite, and its scalers, values and the W and W_last it
  // would produce within the magnitude rule. Changes nothing.
  absl::StatusOr<std::vector<float>> DecodeAnswerChunk(
      const WaitingRound& waiting, size_t index,
      const kernels::Payload& payload) const;

  const SynchronizerOptions options_;
  LpsState* const state_;
  const std::unique_ptr<kernels::Codec> ternary_;
  const std::unique_ptr<kernels::Codec> fp32_;
  // Decoders of the GS's answers, by codec.
  std::map<kernels::CodecId, std::unique_ptr<kernels::Codec>> answer_codecs_;

  std::vector<ChunkSync> chunks_;  // in key order, as the state's
  absl::flat_hash_map<uint32_t, size_t> index_;

  uint64_t next_round_ = 0;
  uint64_t last_round_step_ = 0;  // completed local steps at the last round
  std::deque<WaitingRound> waiting_;
  absl::Time last_answer_time_ = absl::InfinitePast();

  std::optional<double> g_thresh_;
  // The dynamic threshold's last rescale: its epoch, that epoch's first
  // step's LR, and the momentum norm then.
  uint64_t threshold_epoch_ = 0;
  double threshold_lr_ = 0;
  double threshold_momentum_norm_ = 0;
};

}  // namespace tern::server

#endif  // TERN_SERVER_GRADIENT_SYNCHRONIZER_H_
