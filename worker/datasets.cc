// LoadDataset: the names it knows and the loader of each. The loaders, the
// file reading and ShardedBatches are in datasets_*.cc beside this file.
#include "worker/datasets.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "worker/datasets_internal.h"

namespace tern::worker {

using datasets_internal::LoadCifar10;
using datasets_internal::LoadIdxSet;
using datasets_internal::LoadNpySet;
using datasets_internal::MakeSynthetic;

std::vector<std::string> DatasetNames() {
  return {"fashion-mnist", "mnist", "cifar10", "synthetic", "npy"};
}

absl::StatusOr<TrainTest> LoadDataset(absl::string_view name,
                                      const std::string& dir, uint64_t seed) {
  if (name == "fashion-mnist") {
    const std::string where =
        dir.empty() ? std::string(kDefaultFashionMnistDir) : dir;
    return LoadIdxSet(
        where, absl::StrCat("install the dataset-fashion-mnist package (it "
                            "provides ",
                            kDefaultFashionMnistDir,
                            ") or point --data_dir at the Fashion-MNIST IDX "
                            "files"));
  }
  if (name == "mnist" || name == "cifar10" || name == "npy") {
    if (dir.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("dataset ", name, " needs --data_dir"));
    }
    if (name == "cifar10") return LoadCifar10(dir);
    if (name == "npy") return LoadNpySet(dir);
    return LoadIdxSet(dir,
                      "point --data_dir at the MNIST IDX files "
                      "({train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz])");
  }
  if (name == "synthetic") return MakeSynthetic(seed);
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown dataset \"", name,
      "\"; valid datasets: ", absl::StrJoin(DatasetNames(), ", ")));
}

}  // namespace tern::worker
