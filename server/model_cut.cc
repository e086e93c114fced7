#include "server/model_cut.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "core/limits.h"

namespace tern::server {
namespace {

absl::Status WithPrefix(const absl::Status& status, absl::string_view prefix) {
  return absl::Status(status.code(),
                      absl::StrCat(prefix, ": ", status.message()));
}

}  // namespace

absl::StatusOr<Partition> CutModel(const JoinRequest& join,
                                   const ModelLimits& limits) {
  std::vector<uint64_t> elements;
  elements.reserve(join.tensors.size());
  for (const TensorSpec& tensor : join.tensors) {
    absl::StatusOr<uint64_t> count =
        core::TensorElements(tensor.name, tensor.shape);
    if (!count.ok()) return WithPrefix(count.status(), "param spec");
    elements.push_back(*count);
  }
  const uint64_t partition_bytes = join.config.partition_bytes;
  absl::StatusOr<core::ModelSize> model =
      core::SizeModel(elements, partition_bytes);
  if (!model.ok()) return WithPrefix(model.status(), "partition");
  if (model->elements == 0) {
    // tern's workers refuse such a model themselves (param_buffer.cc); a
    // join that declares one would fix a run no worker could join.
    const size_t n = join.tensors.size();
    return absl::InvalidArgumentError(
        absl::StrCat("param spec: the model has no parameters to train (",
                     n == 0 ? "no tensors"
                            : absl::StrCat(n, n == 1 ? " tensor" : " tensors",
                                           " of 0 elements"),
                     ")"));
  }
  if (absl::Status status = core::CheckModelFits(
          *model, limits.num_shards, limits.max_message_bytes, limits.remedy);
      !status.ok()) {
    return status;
  }
  absl::StatusOr<Partition> partition =
      Partition::Create(elements, partition_bytes, limits.num_shards,
                        join.config.shard_assignment);
  if (!partition.ok()) return WithPrefix(partition.status(), "partition");
  return partition;
}

}  // namespace tern::server
