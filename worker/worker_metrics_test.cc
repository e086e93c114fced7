#include "worker/worker_metrics.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/registry.h"
#include "prometheus/text_serializer.h"

namespace tern::worker {
namespace {

using ::testing::HasSubstr;

records::StepRecord Step(uint64_t step, double loss) {
  records::StepRecord record;
  record.worker = 3;
  record.step = step;
  record.loss = loss;
  record.push_bytes = 100;
  record.pull_bytes = 200;
  record.push_msg_bytes = 130;
  record.pull_msg_bytes = 230;
  record.fp32_bytes = 1600;
  record.compute_s = 0.01;
  record.network_s = 0.02;
  return record;
}

TEST(WorkerMetricsTest, NamesLabelsAndValues) {
  prometheus::Registry registry;
  WorkerMetrics metrics(registry, 3, "terngrad", "terngrad");
  metrics.Observe(Step(0, 2.5));
  records::StepRecord last = Step(1, 1.5);
  last.test_accuracy = 0.75;
  metrics.Observe(last);
  metrics.CheckpointWritten(absl::FromUnixSeconds(1000));
  const std::string text =
      prometheus::TextSerializer().Serialize(registry.Collect());
  const std::string labels =
      "codec=\"terngrad\",mode=\"terngrad\",role=\"worker\",worker=\"3\"";
  auto has = [&](const std::string& name, const std::string& more,
                 const std::string& value) {
    EXPECT_THAT(text, HasSubstr(name + "{" + labels + more + "} " + value));
  };
  EXPECT_THAT(text, HasSubstr("# TYPE tern_worker_steps_total counter"));
  has("tern_worker_steps_total", "", "2");
  has("tern_worker_loss", "", "1.5");
  has("tern_worker_test_accuracy", "", "0.75");
  has("tern_worker_payload_bytes_total", ",direction=\"push\"", "200");
  has("tern_worker_payload_bytes_total", ",direction=\"pull\"", "400");
  has("tern_worker_message_bytes_total", ",direction=\"push\"", "260");
  has("tern_worker_message_bytes_total", ",direction=\"pull\"", "460");
  has("tern_worker_fp32_bytes_total", "", "3200");
  has("tern_worker_compression_ratio", ",direction=\"push\"", "16");
  has("tern_worker_compression_ratio", ",direction=\"pull\"", "8");
  EXPECT_THAT(text, HasSubstr("# TYPE tern_worker_phase_seconds histogram"));
  has("tern_worker_phase_seconds_count", ",phase=\"network\"", "2");
  has("tern_worker_phase_seconds_sum", ",phase=\"network\"", "0.04");
  has("tern_worker_checkpoint_writes_total", "", "1");
  has("tern_worker_last_checkpoint_timestamp_seconds", "", "1000");
}

}  // namespace
}  // namespace tern::worker
