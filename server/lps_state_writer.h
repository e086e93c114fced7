// Writes an LPS's state files on a thread of their own (server/
// lps_state_file.h), so that serving waits only for the snapshot's copy,
// not for its serialization and the disk. A snapshot handed in while an
// older one still waits replaces it: the newest state is what a restart
// wants, and a slow disk then skips writes instead of queueing them.
//
// Why a resumed LPS may start from any state written so far: the file
// holds the rounds the GS may not have answered, and the GS keeps its
// answers of the last rounds (server/WEIGHTGRAD.md, "Recovery").
//
// Thread safety: Submit and Flush from any thread.
#ifndef TERN_SERVER_LPS_STATE_WRITER_H_
#define TERN_SERVER_LPS_STATE_WRITER_H_

#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/logging.h"
#include "server/lps_state_file.h"

namespace tern::server {

class LpsStateWriter {
 public:
  // Writes to `path`, fsyncing each write when `sync`; logs each write's
  // failure as an error and its time at debug level.
  LpsStateWriter(std::string path, bool sync, Logger logger);
  // Writes what is still waiting, then ends the thread.
  ~LpsStateWriter();
  LpsStateWriter(const LpsStateWriter&) = delete;
  LpsStateWriter& operator=(const LpsStateWriter&) = delete;

  const std::string& path() const { return path_; }
  // Hands `snapshot`, of local step `step`, to the thread.
  void Submit(LpsSnapshot snapshot, uint64_t step);
  // Waits until every snapshot handed in so far is written (or replaced).
  void Flush();

 private:
  void Run();

  const std::string path_;
  const bool sync_;
  const Logger logger_;

  absl::Mutex mu_;
  std::optional<LpsSnapshot> next_ ABSL_GUARDED_BY(mu_);
  uint64_t next_step_ ABSL_GUARDED_BY(mu_) = 0;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace tern::server

#endif  // TERN_SERVER_LPS_STATE_WRITER_H_
