// The Prometheus metrics of a parameter-server shard and of a WeightGrad
// LPS (both serve tern.v1.ParameterServer; DESIGN section 8), counted by
// their gRPC services (ps_service.h, lps_service.h) once per call, never
// per chunk or element, and set by the serve loop (ps_main.cc):
//
//   tern_ps_pushes_accepted_total        push-pull calls answered with the
//                                        step's sum (a retried copy of a
//                                        counted push is answered too)
//   tern_ps_pushes_rejected_total{reason}  refused pushes, by
//                                        core::PushRefusalName (stale,
//                                        future, invalid, nan, duplicate,
//                                        unauthorized, timeout,
//                                        unavailable, other)
//   tern_ps_barrier_wait_seconds         histogram: a push's arrival to its
//                                        answer (the wait for the others)
//   tern_ps_message_bytes_total{direction}  serialized ShareScalers and
//                                        PushPull requests (in) and
//                                        responses (out)
//   tern_ps_step                         the open step
//   tern_ps_workers_joined               workers that have joined
//
// Every series carries role="ps" and shard="<index>", or role="lps" and
// datacenter="<index>". Thread-safe (prometheus-cpp's metrics are; the
// histogram takes its own short lock per observation).
#ifndef TERN_SERVER_SHARD_METRICS_H_
#define TERN_SERVER_SHARD_METRICS_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/push_refusal.h"
#include "prometheus/counter.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace tern::server {

class ShardMetrics {
 public:
  // The labels of a shard ("ps", shard=<index>) and of an LPS ("lps",
  // datacenter=<index>).
  static prometheus::Labels ShardLabels(uint32_t shard_index);
  static prometheus::Labels LpsLabels(uint32_t datacenter);

  // Registers the metrics above in `registry`, which must outlive this
  // object, with `labels` on every series.
  ShardMetrics(prometheus::Registry& registry,
               const prometheus::Labels& labels);

  // A ShareScalers or PushPull request of `bytes` arrived.
  void Received(uint64_t bytes) { bytes_in_.Increment(bytes); }
  // A push was refused with `status` (not OK).
  void Rejected(const absl::Status& status);
  // A push was answered after `wait` with a response of `bytes`.
  void Answered(absl::Duration wait, uint64_t bytes);
  // A ShareScalers response of `bytes` went out.
  void Sent(uint64_t bytes) { bytes_out_.Increment(bytes); }
  void SetStep(uint64_t step) { step_.Set(static_cast<double>(step)); }
  void SetWorkersJoined(uint32_t workers) {
    joined_.Set(static_cast<double>(workers));
  }

 private:
  static constexpr size_t kReasons =
      static_cast<size_t>(core::PushRefusal::kOther) + 1;

  prometheus::Counter& accepted_;
  std::array<prometheus::Counter*, kReasons> rejected_;
  prometheus::Histogram& wait_;
  prometheus::Counter& bytes_in_;
  prometheus::Counter& bytes_out_;
  prometheus::Gauge& step_;
  prometheus::Gauge& joined_;
};

}  // namespace tern::server

#endif  // TERN_SERVER_SHARD_METRICS_H_
