// Everything `tern worker` is configured with. tern/main.cc fills it from
// flags, environment variables (TERN_<FLAG>) and the cluster spec; the flag
// names are the field names.
#ifndef TERN_WORKER_WORKER_OPTIONS_H_
#define TERN_WORKER_WORKER_OPTIONS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/metrics/metrics_options.h"
#include "common/net/tls_files.h"
#include "kernels/codec_options.h"
#include "kernels/payload.h"
#include "worker/train_mode.h"

namespace tern::worker {

// The compressors' defaults are the kernels' own.
inline constexpr kernels::CodecOptions kDefaultCodecOptions{};

struct WorkerOptions {
  // --- cluster ---
  uint32_t worker_id = 0;
  uint32_t num_workers = 1;
  // Which slice of the training set this worker reads, of how many: by
  // default (num_data_slices 0) its worker_id of num_workers. Geo runs set
  // them so that workers of different data centers, numbered from 0 by
  // their own LPS, still read different data.
  uint32_t data_slice = 0;
  uint32_t num_data_slices = 0;
  // The slice and slice count in effect.
  uint32_t DataSlice() const {
    return num_data_slices == 0 ? worker_id : data_slice;
  }
  uint32_t NumDataSlices() const {
    return num_data_slices == 0 ? num_workers : num_data_slices;
  }
  // Shard addresses (host:port) in shard-index order.
  std::vector<std::string> ps;
  std::string run_id = "tern";
  uint64_t seed = 1;
  // Every worker starts from worker 0's parameters, which worker 0 sends
  // with its join and the shards hand out (--mode=terngrad); otherwise each
  // builds its own and the shards compare their checksums.
  bool broadcast_start = false;
  // --mode=terngrad on the CPU: push each shard as soon as backward has
  // produced its gradients, while the rest of backward runs.
  bool overlap = false;
  // Which shard owns which chunks (ParseShardAssignment,
  // common/partitioner.h); every worker of a run must agree.
  std::string shard_assignment = "even";
  // together: push to every shard at once; in_turn: one shard after
  // another in shard order, each once the previous shard has taken its
  // push (for shards behind one link). worker/ps_client.h.
  std::string push_order = "together";
  double rpc_timeout_s = 60;   // deadline of every RPC
  double join_timeout_s = 300; // how long to keep trying to reach the shards
  // How long a step's calls keep retrying a shard that went away (killed,
  // restarting from its --state_dir) before the worker gives up.
  double server_loss_timeout_s = 120;
  // A call to a shard still unanswered this long is logged once (a late
  // worker holds the step); 0: never.
  double straggler_warn_s = 10;
  // --pace_mbit (common/net/pacing.h): each connection to a shard on
  // another host sends at most this fast; 0: no cap.
  double pace_mbit = 0;
  // --tls_cert, --tls_key, --tls_ca (common/net/tls_flags.h): TLS to the
  // shards; none: plaintext.
  net::TlsFiles tls;

  // terngrad (DESIGN section 3) | weightgrad | gaia (section 4: the shard
  // is a local parameter server that owns the weights and the optimizer).
  // The flags parse the name once (worker/train_mode.h).
  TrainMode mode = TrainMode::kTernGrad;

  // --- model and data ---
  std::string model = "lenet";           // lenet | mlp | cifarnet | PATH.pt
  // cross_entropy | mse (worker/loss.h); a model that returns its own loss
  // ignores it.
  std::string loss = "cross_entropy";
  std::string dataset = "fashion-mnist"; // fashion-mnist | mnist | cifar10 | synthetic
  std::string data_dir;                  // default per dataset
  uint32_t batch_size = 64;              // per worker
  uint64_t steps = 1000;
  uint32_t threads = 1;                  // libtorch and OpenBLAS threads
  // Where the model trains: "cpu", "cuda" or "cuda:N". On a GPU the
  // TernGrad statistics and quantization run there too (worker/
  // device_encoder.h), so only packed bytes cross to the host.
  std::string device = "cpu";

  // --- optimizer ---
  std::string optimizer = "momentum";  // sgd | momentum | adam | adagrad
  double lr = 0.01;
  double momentum = 0.9;
  double weight_decay = 0.0005;
  std::string lr_schedule = "constant";  // constant | poly | step
  uint64_t lr_step_every = 1000;         // step schedule: every N steps
  double lr_gamma = 0.1;                 // step schedule: multiply by

  // --- communication ---
  // terngrad | fp32 | fp16 | onebit | threshold | adaptive | dropping | qsgd:
  // a gradient codec (worker/codec_config.h), parsed once by the flags.
  kernels::CodecId codec = kernels::CodecId::kTernGrad;
  // TernGrad's layouts, by default the fewest bytes (bench/README.md, "The
  // pull in fewer bits").
  std::string packing = "base3";         // push: 2bit | base3
  std::string sum_packing = "huffman";   // pull: bits | radix | huffman
  double clip = 2.5;                     // c of c*sigma; 0 = no clipping
  std::string clip_rule =                // terngrad: worker | shared
      kernels::ClipRuleName(kDefaultCodecOptions.clip_rule);
  std::vector<std::string> fp32_tensors; // tensor names kept in fp32
  uint64_t min_compress_elems = 0;       // smaller tensors stay in fp32
  uint64_t partition_bytes = 4ull << 20;

  // --- compressors (kernels/codec_options.h documents each) ---
  float tau = kDefaultCodecOptions.tau;               // threshold
  float proportion = kDefaultCodecOptions.proportion; // adaptive
  float drop_ratio = kDefaultCodecOptions.drop_ratio; // dropping
  std::string drop_scope =                            // dropping: global | tensor
      kDefaultCodecOptions.drop_scope == kernels::DropScope::kGlobal
          ? "global"
          : "tensor";
  std::string drop_survivors =  // dropping: values | 1bit | 2bit
      kernels::DropSurvivorsName(kDefaultCodecOptions.drop_survivors);
  uint32_t qsgd_levels = kDefaultCodecOptions.qsgd_levels; // qsgd
  uint32_t qsgd_bucket = kDefaultCodecOptions.qsgd_bucket; // qsgd
  // adaptive, dropping; onebit with sampled_means
  uint32_t sample_size = kDefaultCodecOptions.sample_size;
  bool sampled_means = kDefaultCodecOptions.sampled_means; // onebit

  // --- checks and output ---
  uint64_t check_every = 100;            // parameter checksum every N steps
  uint64_t eval_every = 200;             // test-set evaluation every N steps
  // Also after the last step; a benchmark that times only steps turns it
  // off (a 10,000-image evaluation takes longer than its timed steps).
  bool final_eval = true;
  // Evaluate a moving average of the parameters with this decay
  // (worker/parameter_average.h; TernGrad's 0.9999); 0: the parameters.
  double eval_ema_decay = 0;
  std::string metrics_out;               // JSONL file, one record per step
  // Worker checkpoints (worker/checkpoint.h): the directory (empty: none)
  // and how often, in steps; one is also written after the last step.
  std::string checkpoint_dir;
  uint64_t checkpoint_every = 100;
  // After the last step, the trained model to this file (empty: none;
  // worker/model_export.h).
  std::string save_model;
  std::string log_level = "info";
  // --metrics_listen, --metrics_linger_s (common/metrics): Prometheus
  // metrics of this worker (worker/worker_metrics.h).
  metrics::MetricsOptions metrics;
};

}  // namespace tern::worker

#endif  // TERN_WORKER_WORKER_OPTIONS_H_
