// The shape of a data set's examples, which the data sets (datasets.h)
// report and the models (models.h) are built for. A header of its own, so
// that the data sets need no part of libtorch's nn API.
#ifndef TERN_WORKER_INPUT_SHAPE_H_
#define TERN_WORKER_INPUT_SHAPE_H_

#include <cstdint>
#include <vector>

namespace tern::worker {

// The shape of one example and the number of classes.
struct InputShape {
  int64_t channels = 1, height = 28, width = 28, num_classes = 10;
  // The shape of one example as the data set's files hold it (npy: the
  // file's shape past N) when it is not [channels, height, width]; empty
  // otherwise. A TorchScript model sees its inputs in this shape.
  std::vector<int64_t> example_shape;
};

}  // namespace tern::worker

#endif  // TERN_WORKER_INPUT_SHAPE_H_
