#include "worker/gradient_exchange.h"

#include <exception>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/checksum.h"
#include "common/status_macros.h"
#include "torch/optim/sgd.h"
#include "worker/chunk_plan.h"
#include "worker/client_options.h"
#include "worker/codec_set.h"
#include "worker/join.h"
#include "worker/models.h"
#include "worker/param_buffer.h"
#include "worker/ps_client.h"
#include "worker/start_broadcast.h"
#include "worker/terngrad_protocol.h"
#include "worker/worker_flags.h"

namespace tern::worker {
namespace {

// The optimizer TernGradProtocol steps after decoding: none, since the
// caller's own optimizer applies the update.
class CallerUpdates : public torch::optim::Optimizer {
 public:
  CallerUpdates()
      : Optimizer(std::vector<torch::Tensor>{},
                  std::make_unique<torch::optim::SGDOptions>(0.0)) {}
  torch::Tensor step(LossClosure) override { return {}; }
};

// The first line of a libtorch error; what() goes on with a backtrace.
std::string FirstLine(const std::exception& e) {
  const std::string text = e.what();
  return text.substr(0, text.find('\n'));
}

// Registers `tensor` as parameter `name` ("a.b.weight") of `root`, creating
// the submodules its name passes through.
absl::Status RegisterPath(const HostTensor& tensor, torch::nn::Module& root) {
  const std::vector<std::string> path = absl::StrSplit(tensor.name, '.');
  for (const std::string& part : path) {
    if (part.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter name '", tensor.name, "' has an empty part"));
    }
  }
  if (tensor.data == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("parameter '", tensor.name, "' has no data"));
  }
  for (const int64_t dim : tensor.shape) {
    if (dim < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter '", tensor.name, "' has a negative size"));
    }
  }
  torch::nn::Module* at = &root;
  for (size_t i = 0; i + 1 < path.size(); ++i) {
    auto children = at->named_children();
    if (const auto* child = children.find(path[i]); child != nullptr) {
      at = child->get();
    } else {
      at = at->register_module(path[i], std::make_shared<torch::nn::Module>())
               .get();
    }
  }
  // A view of the caller's memory: the checksum reads the caller's
  // parameters as they are, after its optimizer stepped.
  at->register_parameter(path.back(),
                         torch::from_blob(tensor.data, tensor.shape),
                         /*requires_grad=*/true);
  return absl::OkStatus();
}

// A module whose named_parameters() are `params`, in their order, viewing
// the caller's memory. INVALID_ARGUMENT for a name twice, or an order no
// module tree lists (a module's parameter after its submodule's).
absl::StatusOr<std::shared_ptr<torch::nn::Module>> MirrorTensors(
    const std::vector<HostTensor>& params) {
  auto root = std::make_shared<torch::nn::Module>();
  try {
    for (const HostTensor& tensor : params) {
      TERN_RETURN_IF_ERROR(RegisterPath(tensor, *root));
    }
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("the parameters' names: ", FirstLine(e)));
  }
  std::vector<std::string> listed;
  for (const auto& item : root->named_parameters())
    listed.push_back(item.key());
  std::vector<std::string> given;
  for (const HostTensor& tensor : params) given.push_back(tensor.name);
  if (listed != given) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the parameters [", absl::StrJoin(given, ","),
        "] are not in an order a module lists them ([",
        absl::StrJoin(listed, ","),
        "]): pass model.named_parameters() as the module gives them"));
  }
  return root;
}

// The ParamSpec hash `tern worker` sends: a .pt model's file hash, else
// the ParamSpec's.
absl::StatusOr<uint64_t> SpecHash(const WorkerOptions& options,
                                  const ParamBuffer& params) {
  if (!IsTorchScriptPath(options.model)) return params.spec_hash();
  std::ifstream in(options.model, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(
        "model ", options.model,
        " cannot be read (model= names the TorchScript file the other "
        "workers train, for its hash)"));
  }
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return ChecksumOf(bytes.str());
}

absl::StatusOr<std::unique_ptr<PsClient>> Connect(const WorkerOptions& options,
                                                  const ChunkPlan& plan,
                                                  const Logger& logger) {
  TERN_ASSIGN_OR_RETURN(int max_message_bytes,
                        MessageBytesBound(plan.partition));
  return PsClient::Connect(options.ps,
                           ClientOptionsFor(options, max_message_bytes),
                           logger);
}

}  // namespace

// Optional members have no default constructor; Create sets them all.
struct GradientExchange::State {
  WorkerOptions options;
  Logger logger;
  std::shared_ptr<torch::nn::Module> module;
  std::optional<ParamBuffer> params;
  uint64_t spec_hash = 0;
  std::optional<ChunkPlan> plan;
  std::optional<CodecSet> codecs;
  CallerUpdates no_update;
  std::unique_ptr<PsClient> client;
  // Borrows the members above, so it is declared after them.
  std::unique_ptr<TernGradProtocol> protocol;
  bool joined = false;
  uint64_t next_step = 0;
};

GradientExchange::GradientExchange(std::unique_ptr<State> state)
    : state_(std::move(state)) {}
GradientExchange::~GradientExchange() = default;

absl::StatusOr<std::unique_ptr<GradientExchange>> GradientExchange::Create(
    const WorkerOptions& options, std::vector<HostTensor> params,
    Logger logger) {
  TERN_RETURN_IF_ERROR(ValidateWorkerOptions(options));
  if (options.mode != TrainMode::kTernGrad) {
    return absl::InvalidArgumentError(
        "--mode: a GradientExchange exchanges gradients (--mode=terngrad); "
        "the LPS modes exchange weights");
  }
  if (options.overlap) {
    return absl::InvalidArgumentError(
        "--overlap: a GradientExchange exchanges the gradients your own "
        "backward has produced, after it; it cannot hook into it");
  }
  auto state = std::make_unique<State>();
  state->options = options;
  state->logger = std::move(logger);
  TERN_ASSIGN_OR_RETURN(state->module, MirrorTensors(params));
  TERN_ASSIGN_OR_RETURN(ParamBuffer buffer,
                        ParamBuffer::Create(*state->module));
  state->params.emplace(std::move(buffer));
  TERN_ASSIGN_OR_RETURN(state->spec_hash, SpecHash(options, *state->params));
  TERN_ASSIGN_OR_RETURN(const kernels::CodecOptions codec,
                        CodecSet::PushOptions(options));
  TERN_ASSIGN_OR_RETURN(const ShardAssignment assignment,
                        ParseShardAssignment(options.shard_assignment));
  TERN_ASSIGN_OR_RETURN(
      ChunkPlan plan,
      MakeChunkPlan(state->params->names(), state->params->tensor_elements(),
                    options.partition_bytes,
                    static_cast<uint32_t>(options.ps.size()),
                    options.fp32_tensors, options.min_compress_elems,
                    /*share_scalers=*/codec.id == kernels::CodecId::kTernGrad,
                    assignment));
  state->plan.emplace(std::move(plan));
  TERN_ASSIGN_OR_RETURN(
      CodecSet codecs,
      CodecSet::Create(codec, *state->plan, state->params->spec()));
  state->codecs.emplace(std::move(codecs));
  TERN_ASSIGN_OR_RETURN(state->client,
                        Connect(options, *state->plan, state->logger));
  TERN_ASSIGN_OR_RETURN(
      state->protocol,
      TernGradProtocol::Create(state->options, *state->params, *state->plan,
                               *state->codecs, state->no_update,
                               /*device_encoder=*/nullptr));
  return std::unique_ptr<GradientExchange>(
      new GradientExchange(std::move(state)));
}

absl::Status GradientExchange::Join(bool broadcast_start) {
  State& s = *state_;
  s.options.broadcast_start = s.options.broadcast_start || broadcast_start;
  const tern::v1::JoinRequest request =
      BaseJoinRequest(s.options, *s.plan, s.codecs->options(), s.params->spec(),
                      s.spec_hash, s.params->Checksum());
  TERN_ASSIGN_OR_RETURN(
      const std::vector<tern::v1::JoinResponse> responses,
      s.client->Join(s.options.broadcast_start
                         ? JoinRequestsWithStart(request, *s.plan, *s.params,
                                                 s.codecs->fp32())
                         : std::vector<tern::v1::JoinRequest>(
                               s.client->num_shards(), request)));
  TERN_RETURN_IF_ERROR(CheckJoinResponses(responses, *s.client, *s.plan,
                                          s.options.run_id, ResumePoint{}));
  if (s.options.broadcast_start && s.options.worker_id != 0) {
    TERN_RETURN_IF_ERROR(
        LoadStart(responses, *s.plan, s.codecs->fp32(), &*s.params));
  }
  s.joined = true;
  s.logger->info(
      "joined {} shard(s) as worker {}/{}: {} parameters in {} tensors, "
      "codec {}, spec hash {}, checksum {}",
      responses.size(), s.options.worker_id, s.options.num_workers,
      s.params->total_elements(), s.params->names().size(),
      s.codecs->run().name(), FormatChecksum(s.spec_hash),
      FormatChecksum(request.param_checksum()));
  return absl::OkStatus();
}

bool GradientExchange::joined() const { return state_->joined; }
uint64_t GradientExchange::next_step() const { return state_->next_step; }
const WorkerOptions& GradientExchange::options() const {
  return state_->options;
}

absl::StatusOr<StepRecord> GradientExchange::Step(
    absl::Span<float* const> gradients) {
  State& s = *state_;
  const std::vector<uint64_t>& elements = s.params->tensor_elements();
  if (gradients.size() != elements.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        gradients.size(), " gradients for ", elements.size(), " parameters"));
  }
  if (!s.joined) TERN_RETURN_IF_ERROR(Join());
  // Each parameter's gradient is a view of the caller's: the protocol
  // gathers from it and scatters the decoded average back into it.
  size_t t = 0;
  for (auto& param : s.module->parameters()) {
    if (gradients[t] == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("no gradient for '", s.params->names()[t], "'"));
    }
    param.mutable_grad() = torch::from_blob(gradients[t++], param.sizes());
  }
  StepRecord record;
  record.worker = s.options.worker_id;
  record.step = s.next_step;
  record.fp32_bytes = sizeof(float) * s.params->total_elements();
  const absl::Status stepped =
      s.protocol->Step(*s.client, s.next_step, &record);
  // The views must not outlive the call: the caller's gradients may go.
  for (auto& param : s.module->parameters())
    param.mutable_grad() = torch::Tensor();
  TERN_RETURN_IF_ERROR(stepped);
  ++s.next_step;
  return record;
}

absl::Span<float> GradientExchange::GradientBuffer(uint32_t tensor) {
  return state_->params->TensorGradients(tensor);
}

uint64_t GradientExchange::Checksum() const {
  return state_->params->Checksum();
}

absl::StatusOr<uint64_t> GradientExchange::CheckParams() {
  State& s = *state_;
  if (s.next_step == 0) {
    return absl::FailedPreconditionError(
        "no step exchanged yet: the join checked the initial parameters");
  }
  tern::v1::CheckParamsRequest request;
  request.set_worker_id(s.options.worker_id);
  request.set_step(s.next_step - 1);
  request.set_param_checksum(Checksum());
  TERN_RETURN_IF_ERROR(s.client->CheckParams(request));
  return request.param_checksum();
}

}  // namespace tern::worker
