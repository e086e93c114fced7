#include "common/process/stop.h"

namespace tern::process {

void StopRequest::Request(const std::string& reason) {
  absl::MutexLock lock(&mu_);
  if (notification_.HasBeenNotified()) return;
  reason_ = reason;
  notification_.Notify();
}

std::string StopRequest::reason() const {
  absl::MutexLock lock(&mu_);
  return reason_;
}

}  // namespace tern::process
