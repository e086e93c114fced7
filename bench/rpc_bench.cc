// The fp32 push-pull of a real model against a plain gRPC echo of the same
// bytes, both on loopback through common/net's channels and servers
// (issue 20, item 3; bench/README.md, "The fp32 path against gRPC"):
//
//   rpc_bench serve --listen 127.0.0.1:0 --port_file F [--max_message_mb M]
//       an echo server: answers every request with its chunks, unchanged;
//   rpc_bench run --ps HOST:PORT --echo HOST:PORT [--model lenet]
//       [--rounds 5] [--calls 10] [--warmup 5] [--in_place]
//       one worker (worker::GradientExchange, as tern.torch and tern worker
//       step) against a 1-worker shard, and the echo client over the same
//       model's gradient bytes, in alternating rounds of --calls calls each.
//       --in_place keeps the gradients in the exchange's own buffers
//       (GradientExchange::GradientBuffer, as tern.torch and tern worker
//       keep them), so that its step copies nothing in or out; the echo
//       still copies into its request and out of its answer.
//
// A push-pull call is a whole exchange step: fp32 encode, the PushPull RPC,
// decode into the gradients. An echo call copies the gradients into a
// request of the same chunks, calls Echo and copies the answer back. The
// report: median and p90 seconds per call of each, MB/s of model per round
// trip, and echo / push-pull (>= 1: tern's step is at least as fast).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "common/net/channel.h"
#include "common/net/server.h"
#include "common/process/allocator.h"
#include "common/process/serve_loop.h"
#include "common/process/signals.h"
#include "common/process/stop.h"
#include "grpcpp/grpcpp.h"
#include "rpc_echo.grpc.pb.h"
#include "worker/gradient_exchange.h"
#include "worker/models.h"
#include "worker/worker_flags.h"

namespace tern::bench {
namespace {

using tern::bench::v1::EchoMessage;

constexpr int kMiB = 1 << 20;

class EchoService final : public v1::Echo::Service {
  grpc::Status Echo(grpc::ServerContext* /*context*/,
                    const EchoMessage* request,
                    EchoMessage* response) override {
    *response = *request;
    return grpc::Status::OK;
  }
};

int Serve(const std::string& listen, const std::string& port_file,
          int max_message_mb) {
  const Logger logger = MakeLogger("echo", "0");
  EchoService service;
  net::ServerOptions options;
  options.listen = listen;
  options.max_message_bytes = max_message_mb * kMiB;
  absl::StatusOr<std::unique_ptr<net::Server>> server =
      net::Server::Start(options, {{&service, v1::Echo::service_full_name()}});
  if (!server.ok()) {
    std::fprintf(stderr, "rpc_bench serve: %s\n",
                 std::string(server.status().message()).c_str());
    return 1;
  }
  if (!process::WritePortFileIfAsked(port_file, (*server)->port(), logger)) {
    return 1;
  }
  process::StopRequest stop;
  process::SignalWatcher watcher(&stop);
  const int code = process::ServeUntilStopped(
      stop, logger, [](absl::Time) { return absl::OkStatus(); });
  (*server)->Shutdown(absl::Seconds(1));
  return code;
}

// The model's parameters as the exchange borrows them, and one gradient
// buffer per parameter.
struct ModelBuffers {
  std::shared_ptr<worker::Model> model;
  std::vector<worker::HostTensor> params;
  std::vector<std::vector<float>> gradients;
  std::vector<float*> gradient_pointers;
  size_t bytes = 0;
};

absl::StatusOr<ModelBuffers> MakeBuffers(const std::string& model_name) {
  ModelBuffers buffers;
  absl::StatusOr<std::shared_ptr<worker::Model>> model =
      worker::MakeModel(model_name, worker::InputShape{});
  if (!model.ok()) return model.status();
  buffers.model = *model;
  for (const auto& item : buffers.model->named_parameters()) {
    torch::Tensor tensor = item.value();
    buffers.params.push_back(
        {item.key(),
         std::vector<int64_t>(tensor.sizes().begin(), tensor.sizes().end()),
         tensor.data_ptr<float>()});
    // Small, varied values: the fp32 path does not care what they are.
    std::vector<float> gradient(tensor.numel());
    for (size_t i = 0; i < gradient.size(); ++i) {
      gradient[i] = 1e-3f * static_cast<float>(i % 97) - 0.05f;
    }
    buffers.bytes += gradient.size() * sizeof(float);
    buffers.gradients.push_back(std::move(gradient));
  }
  for (auto& gradient : buffers.gradients) {
    buffers.gradient_pointers.push_back(gradient.data());
  }
  return buffers;
}

// Calls chunk(bytes, size) for each piece of at most `chunk_bytes` of every
// gradient, in order: the echo's chunks.
template <typename Chunk>
void ForEachChunk(ModelBuffers& buffers, size_t chunk_bytes, Chunk&& chunk) {
  for (auto& gradient : buffers.gradients) {
    char* bytes = reinterpret_cast<char*>(gradient.data());
    const size_t size = gradient.size() * sizeof(float);
    for (size_t at = 0; at < size; at += chunk_bytes) {
      chunk(bytes + at, std::min(chunk_bytes, size - at));
    }
  }
}

// One echo round trip of the gradients' bytes in chunks of the worker's
// --partition_bytes, copied in and out as the fp32 codec's encode and
// decode copy them.
absl::Status EchoOnce(v1::Echo::Stub& stub, size_t chunk_bytes,
                      ModelBuffers& buffers) {
  EchoMessage request;
  ForEachChunk(buffers, chunk_bytes, [&](const char* bytes, size_t size) {
    request.add_chunks(bytes, size);
  });
  EchoMessage response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(60));
  const grpc::Status status = stub.Echo(&context, request, &response);
  if (!status.ok()) {
    return absl::UnavailableError(
        absl::StrCat("Echo: ", status.error_message()));
  }
  if (response.chunks_size() != request.chunks_size()) {
    return absl::DataLossError(
        absl::StrCat("Echo answered ", response.chunks_size(), " chunks, sent ",
                     request.chunks_size()));
  }
  int chunk = 0;
  bool same_sizes = true;
  ForEachChunk(buffers, chunk_bytes, [&](char* bytes, size_t size) {
    const std::string& answer = response.chunks(chunk++);
    same_sizes = same_sizes && answer.size() == size;
    if (answer.size() == size) std::memcpy(bytes, answer.data(), size);
  });
  if (!same_sizes) {
    return absl::DataLossError("Echo answered a chunk of another size");
  }
  return absl::OkStatus();
}

struct Summary {
  double median = 0, p90 = 0;
};

Summary Summarize(std::vector<double> seconds) {
  std::sort(seconds.begin(), seconds.end());
  const size_t n = seconds.size();
  return {seconds[n / 2], seconds[std::min(n - 1, n * 9 / 10)]};
}

// Times `calls` calls of `call` (seconds each) into `out`; stops at the
// first error.
template <typename Call>
absl::Status Time(int calls, Call&& call, std::vector<double>* out) {
  for (int i = 0; i < calls; ++i) {
    const absl::Time start = absl::Now();
    if (absl::Status status = call(); !status.ok()) return status;
    if (out != nullptr) {
      out->push_back(absl::ToDoubleSeconds(absl::Now() - start));
    }
  }
  return absl::OkStatus();
}

struct RunOptions {
  std::string ps, echo, model = "lenet";
  int rounds = 5, calls = 10, warmup = 5;
  bool in_place = false;
};

// Moves every gradient into the exchange's buffer for it (same values).
void UseExchangeBuffers(worker::GradientExchange& exchange,
                        ModelBuffers& buffers) {
  for (size_t t = 0; t < buffers.gradients.size(); ++t) {
    const absl::Span<float> slot =
        exchange.GradientBuffer(static_cast<uint32_t>(t));
    std::copy(buffers.gradients[t].begin(), buffers.gradients[t].end(),
              slot.begin());
    buffers.gradient_pointers[t] = slot.data();
  }
}

void Report(const RunOptions& o, size_t bytes, std::vector<double> push_pull,
            std::vector<double> echo) {
  const Summary p = Summarize(std::move(push_pull));
  const Summary e = Summarize(std::move(echo));
  const double mb = static_cast<double>(bytes) / 1e6;
  std::printf(
      "model %s: %.2f MB of fp32 per round trip, %d rounds of %d "
      "calls each after %d warm-up calls; gradients %s\n",
      o.model.c_str(), mb, o.rounds, o.calls, o.warmup,
      o.in_place ? "in the exchange's buffers" : "copied in and out");
  std::printf("%-22s %10s %10s %10s\n", "call", "median s", "p90 s", "MB/s");
  std::printf("%-22s %10.4f %10.4f %10.1f\n", "tern fp32 push-pull", p.median,
              p.p90, mb / p.median);
  std::printf("%-22s %10.4f %10.4f %10.1f\n", "gRPC echo", e.median, e.p90,
              mb / e.median);
  std::printf("echo / push-pull (median): %.2f\n", e.median / p.median);
}

// Prints `status` as rpc_bench's error; the exit code.
int Fail(const absl::Status& status) {
  std::fprintf(stderr, "rpc_bench run: %s\n",
               std::string(status.message()).c_str());
  return 1;
}

int Run(const RunOptions& o) {
  absl::StatusOr<ModelBuffers> buffers = MakeBuffers(o.model);
  if (!buffers.ok()) return Fail(buffers.status());
  absl::StatusOr<worker::WorkerOptions> options = worker::ParseWorkerArgs(
      {"--ps=" + o.ps, "--num_workers=1", "--worker_id=0", "--codec=fp32",
       "--model=" + o.model});
  if (!options.ok()) return Fail(options.status());
  auto exchange = worker::GradientExchange::Create(*options, buffers->params,
                                                   MakeNullLogger());
  if (!exchange.ok()) return Fail(exchange.status());
  if (o.in_place) UseExchangeBuffers(**exchange, *buffers);
  net::ChannelOptions channel;
  channel.max_message_bytes = static_cast<int>(2 * buffers->bytes + kMiB);
  v1::Echo::Stub stub(net::CreateChannel(o.echo, channel));

  // The exchange's own split of each timed step (StepRecord).
  std::vector<double> encode_s, network_s, decode_s;
  bool timing = false;
  auto push_pull = [&]() -> absl::Status {
    absl::StatusOr<records::StepRecord> record =
        (*exchange)->Step(buffers->gradient_pointers);
    if (!record.ok()) return record.status();
    if (timing) {
      encode_s.push_back(record->encode_s);
      network_s.push_back(record->network_s);
      decode_s.push_back(record->decode_s);
    }
    return absl::OkStatus();
  };
  auto echo = [&]() {
    return EchoOnce(stub, options->partition_bytes, *buffers);
  };
  std::vector<double> push_pull_s, echo_s;
  absl::Status status = Time(o.warmup, push_pull, nullptr);
  if (status.ok()) status = Time(o.warmup, echo, nullptr);
  timing = true;
  for (int r = 0; r < o.rounds && status.ok(); ++r) {
    status = Time(o.calls, push_pull, &push_pull_s);
    if (status.ok()) status = Time(o.calls, echo, &echo_s);
  }
  if (!status.ok()) return Fail(status);
  Report(o, buffers->bytes, std::move(push_pull_s), std::move(echo_s));
  std::printf(
      "push-pull split (medians, s): encode %.4f, network %.4f, "
      "decode %.4f\n",
      Summarize(encode_s).median, Summarize(network_s).median,
      Summarize(decode_s).median);
  return 0;
}

int Main(int argc, char** argv) {
  CLI::App app(
      "tern's fp32 push-pull against a plain gRPC echo of the same "
      "bytes, on loopback (bench/README.md)",
      "rpc_bench");
  app.require_subcommand(1, 1);
  std::string listen = "127.0.0.1:0", port_file;
  int max_message_mb = 64;
  CLI::App* serve = app.add_subcommand("serve", "serve Echo until SIGTERM");
  serve->add_option("--listen", listen, "host:port to listen on");
  serve->add_option("--port_file", port_file, "write the bound port here");
  serve->add_option("--max_message_mb", max_message_mb, "largest message, MiB")
      ->check(CLI::Range(1, 1024));
  RunOptions o;
  CLI::App* run = app.add_subcommand("run", "time both, alternating");
  run->add_option("--ps", o.ps,
                  "the shard, host:port (tern ps "
                  "--num_workers=1)")
      ->required();
  run->add_option("--echo", o.echo, "the echo server, host:port")->required();
  run->add_option("--model", o.model, "built-in model whose size to move");
  run->add_option("--rounds", o.rounds, "alternating rounds")
      ->check(CLI::Range(1, 1000));
  run->add_option("--calls", o.calls, "timed calls of each per round")
      ->check(CLI::Range(1, 1000));
  run->add_option("--warmup", o.warmup, "untimed calls of each first")
      ->check(CLI::Range(0, 1000));
  run->add_flag("--in_place", o.in_place,
                "keep the gradients in the exchange's own buffers (as "
                "tern worker and tern.torch do): no copy in or out");
  CLI11_PARSE(app, argc, argv);
  if (serve->parsed()) return Serve(listen, port_file, max_message_mb);
  return Run(o);
}

}  // namespace
}  // namespace tern::bench

int main(int argc, char** argv) {
  tern::process::KeepFreedMemory();  // as tern does
  return tern::bench::Main(argc, argv);
}
