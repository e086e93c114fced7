// Test-only: a logger that keeps what it logs, so a test can count and
// read the lines (the message alone, without time or level).
#ifndef TERN_COMMON_CAPTURED_LOG_H_
#define TERN_COMMON_CAPTURED_LOG_H_

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "common/logging.h"
#include "spdlog/sinks/ringbuffer_sink.h"

namespace tern {

class CapturedLog {
 public:
  // Keeps the last `capacity` lines.
  explicit CapturedLog(size_t capacity = 100000)
      : sink_(std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(capacity)),
        logger_(std::make_shared<spdlog::logger>("captured", sink_)) {
    logger_->set_level(spdlog::level::trace);
  }

  const Logger& logger() const { return logger_; }

  // The messages logged at `level` or above, oldest first.
  std::vector<std::string> Lines(
      spdlog::level::level_enum level = spdlog::level::trace) const {
    std::vector<std::string> lines;
    for (const spdlog::details::log_msg_buffer& message : sink_->last_raw()) {
      if (message.level < level) continue;
      lines.emplace_back(message.payload.data(), message.payload.size());
    }
    return lines;
  }

 private:
  std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink_;
  Logger logger_;
};

}  // namespace tern

#endif  // TERN_COMMON_CAPTURED_LOG_H_
