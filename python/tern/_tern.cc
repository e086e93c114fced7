// tern._tern: the C++ module under tern.torch (python/tern/torch.py). It
// wraps worker::GradientExchange (worker/gradient_exchange.h) and sees the
// tensors only as buffers (numpy views of CPU float32 tensors), so it needs
// neither libtorch's nor PyTorch's headers: the exchange itself runs in the
// same libtorch that PyTorch loads.
//
// Errors: bad arguments raise ValueError (TypeError for a buffer that is
// not float32); what the shards answer, or their silence, raises
// tern.torch.ShardError with the status code's name (.code, e.g.
// "FAILED_PRECONDITION"), its number (.code_value, gRPC's numbering) and
// the message (.message). The GIL is released while the shards are waited
// for.
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/checksum.h"
#include "common/logging.h"
#include "pybind11/numpy.h"
#include "pybind11/pybind11.h"
#include "pybind11/stl.h"
#include "worker/gradient_exchange.h"
#include "worker/worker_flags.h"

namespace py = pybind11;

namespace tern::python {
namespace {

// An error status on its way to Python as a ShardError.
struct ShardFailure {
  absl::Status status;
};

// A float32, C-contiguous, writable buffer of `elements` floats, or
// TypeError/ValueError naming `what`.
float* FloatView(const py::buffer& buffer, const std::string& what,
                 int64_t elements) {
  const py::buffer_info info = buffer.request(/*writable=*/true);
  if (info.format != py::format_descriptor<float>::format() ||
      info.itemsize != sizeof(float)) {
    throw py::type_error(
        absl::StrCat(what, " is not float32 (format '", info.format, "')"));
  }
  int64_t stride = sizeof(float);
  for (int64_t d = info.ndim - 1; d >= 0; --d) {
    if (info.shape[d] > 1 && info.strides[d] != stride) {
      throw py::value_error(absl::StrCat(what, " is not contiguous"));
    }
    stride *= info.shape[d];
  }
  if (elements >= 0 && info.size != elements) {
    throw py::value_error(absl::StrCat(what, " has ", info.size,
                                       " elements, expected ", elements));
  }
  return static_cast<float*>(info.ptr);
}

// The exchange with the buffers whose memory it views, kept alive here.
class Exchange {
 public:
  // `args`: tern worker's flags; `params`: (name, buffer) in
  // named_parameters() order.
  Exchange(const std::vector<std::string>& args,
           std::vector<std::pair<std::string, py::buffer>> params) {
    absl::StatusOr<worker::WorkerOptions> options =
        worker::ParseWorkerArgs(args);
    if (!options.ok()) throw py::value_error(options.status().ToString());
    std::vector<worker::HostTensor> tensors;
    for (auto& [name, buffer] : params) {
      const py::buffer_info info = buffer.request(/*writable=*/true);
      worker::HostTensor tensor{name, info.shape,
                                FloatView(buffer, "parameter '" + name + "'",
                                          /*elements=*/-1)};
      tensors.push_back(std::move(tensor));
      elements_.push_back(info.size);
      names_.push_back(name);
      views_.push_back(std::move(buffer));
    }
    Logger logger = MakeLogger("worker", std::to_string(options->worker_id));
    if (auto level = ParseLogLevel(options->log_level); level.ok()) {
      logger->set_level(*level);
    }
    absl::StatusOr<std::unique_ptr<worker::GradientExchange>> exchange =
        worker::GradientExchange::Create(*options, std::move(tensors),
                                         std::move(logger));
    if (absl::IsNotFound(exchange.status())) {
      throw py::value_error(exchange.status().ToString());
    }
    if (!exchange.ok()) throw py::value_error(exchange.status().ToString());
    exchange_ = *std::move(exchange);
  }

  // `broadcast_start`: every worker starts from worker 0's parameters,
  // written into this worker's parameter memory.
  void Join(bool broadcast_start) {
    absl::Status joined;
    {
      py::gil_scoped_release unlocked;
      joined = exchange_->Join(broadcast_start);
    }
    if (!joined.ok()) throw ShardFailure{joined};
  }

  // The step's record as a dict: step, push_bytes, pull_bytes, seconds.
  py::dict Step(const std::vector<py::buffer>& gradients) {
    if (gradients.size() != elements_.size()) {
      throw py::value_error(absl::StrCat(gradients.size(), " gradients for ",
                                         elements_.size(), " parameters"));
    }
    std::vector<float*> views;
    for (size_t t = 0; t < gradients.size(); ++t) {
      views.push_back(FloatView(
          gradients[t], "the gradient of '" + names_[t] + "'", elements_[t]));
    }
    absl::StatusOr<worker::StepRecord> record;
    {
      py::gil_scoped_release unlocked;
      record = exchange_->Step(views);
    }
    if (!record.ok()) throw ShardFailure{record.status()};
    py::dict out;
    out["step"] = record->step;
    out["push_bytes"] = record->push_bytes;
    out["pull_bytes"] = record->pull_bytes;
    out["fp32_bytes"] = record->fp32_bytes;
    out["encode_s"] = record->encode_s;
    out["network_s"] = record->network_s;
    out["decode_s"] = record->decode_s;
    return out;
  }

  // The exchange's own memory for parameter `tensor`'s gradient, as a
  // float32 array viewing it (the def keeps this Exchange alive with it).
  // A gradient kept there is exchanged in place, without copies.
  py::array_t<float> GradientBuffer(size_t tensor) {
    if (tensor >= elements_.size()) {
      throw py::index_error(absl::StrCat("parameter ", tensor, " of ",
                                         elements_.size()));
    }
    const absl::Span<float> buffer =
        exchange_->GradientBuffer(static_cast<uint32_t>(tensor));
    // A base that frees nothing: without one, pybind11 would copy.
    const py::capsule borrowed(buffer.data(), [](void*) {});
    return py::array_t<float>(static_cast<py::ssize_t>(buffer.size()),
                              buffer.data(), borrowed);
  }

  std::string Checksum() const { return FormatChecksum(exchange_->Checksum()); }

  std::string CheckParams() {
    absl::StatusOr<uint64_t> checked;
    {
      py::gil_scoped_release unlocked;
      checked = exchange_->CheckParams();
    }
    if (!checked.ok()) throw ShardFailure{checked.status()};
    return FormatChecksum(*checked);
  }

  bool joined() const { return exchange_->joined(); }
  uint64_t next_step() const { return exchange_->next_step(); }
  uint32_t worker_id() const { return exchange_->options().worker_id; }
  uint64_t check_every() const { return exchange_->options().check_every; }

 private:
  std::vector<py::buffer> views_;  // the parameters' memory, kept alive
  std::vector<int64_t> elements_;
  std::vector<std::string> names_;
  std::unique_ptr<worker::GradientExchange> exchange_;
};

// Raises ShardFailure as the module's ShardError.
void TranslateShardFailure(std::exception_ptr failure) {
  try {
    if (failure) std::rethrow_exception(failure);
  } catch (const ShardFailure& e) {
    const py::object type =
        py::module_::import("tern._tern").attr("ShardError");
    const std::string code = absl::StatusCodeToString(e.status.code());
    const std::string message(e.status.message());
    py::object error = type(absl::StrCat(code, ": ", message));
    error.attr("code") = code;
    error.attr("code_value") = static_cast<int>(e.status.code());
    error.attr("message") = message;
    PyErr_SetObject(type.ptr(), error.ptr());
  }
}

}  // namespace
}  // namespace tern::python

PYBIND11_MODULE(_tern, m) {
  using tern::python::Exchange;
  m.doc() = "tern's worker-side client for tern.torch (python/tern/torch.py)";
  py::exception<tern::python::ShardFailure>(m, "ShardError", PyExc_RuntimeError)
      .doc() =
      "An error of the exchange with the shards: .code (the status code's "
      "name, e.g. 'FAILED_PRECONDITION'), .code_value (gRPC's number) and "
      ".message.";
  py::register_exception_translator(&tern::python::TranslateShardFailure);
  m.def(
      "check_flags",
      [](const std::vector<std::string>& args) {
        const auto options = tern::worker::ParseWorkerArgs(args);
        if (!options.ok()) throw py::value_error(options.status().ToString());
      },
      py::arg("args"), "ValueError unless `args` are valid tern worker flags.");
  m.def(
      "timeout_defaults",
      [] {
        // tern worker's defaults, so that init() shows the same numbers.
        const tern::worker::WorkerOptions defaults;
        py::dict out;
        out["rpc_timeout_s"] = defaults.rpc_timeout_s;
        out["join_timeout_s"] = defaults.join_timeout_s;
        out["server_loss_timeout_s"] = defaults.server_loss_timeout_s;
        out["straggler_warn_s"] = defaults.straggler_warn_s;
        return out;
      },
      "tern worker's defaults of the four timeout flags, in seconds.");
  py::class_<Exchange>(m, "Exchange")
      .def(py::init<const std::vector<std::string>&,
                    std::vector<std::pair<std::string, py::buffer>>>(),
           py::arg("args"), py::arg("params"))
      .def("join", &Exchange::Join, py::arg("broadcast_start") = false)
      .def("step", &Exchange::Step, py::arg("gradients"))
      .def("gradient_buffer", &Exchange::GradientBuffer, py::arg("tensor"),
           py::keep_alive<0, 1>())
      .def("checksum", &Exchange::Checksum)
      .def("check_params", &Exchange::CheckParams)
      .def_property_readonly("joined", &Exchange::joined)
      .def_property_readonly("next_step", &Exchange::next_step)
      .def_property_readonly("worker_id", &Exchange::worker_id)
      .def_property_readonly("check_every", &Exchange::check_every);
}
