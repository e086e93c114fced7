// What the servers of a geo-distributed run report when they stop
// (`--report_file`), for `tern launch`'s summary (tern/geo_report.h) and
// anyone else who wants the numbers without reading logs. One JSON object
// per file, written atomically; its "kind" names the schema. Field names are
// the struct members' names, defined once below (NLOHMANN_DEFINE_...).
#ifndef TERN_COMMON_RECORDS_SERVER_REPORT_H_
#define TERN_COMMON_RECORDS_SERVER_REPORT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace tern::records {

// A WeightGrad/Gaia LPS (`tern ps --mode=gaia|weightgrad`), "kind": "lps".
struct LpsReport {
  uint32_t datacenter = 0;
  // Local steps it completed.
  uint64_t steps = 0;
  // Its final synchronization with the global server is done: the byte
  // counts are the whole run's, and param_checksum is the model every data
  // center ends on.
  bool final_sync_done = false;
  // Its parameters' checksum as it stopped ("0x" + 16 hex digits).
  std::string param_checksum;
  // Payload bytes of the updates it sent to the global server and of the
  // answers it received (what its data center's WAN link carried, without
  // protobuf framing).
  uint64_t wan_bytes_up = 0;
  uint64_t wan_bytes_down = 0;
};

// The global server (`tern global`), "kind": "global".
struct GlobalServerReport {
  // The round open when it stopped.
  uint64_t open_round = 0;
  uint64_t rounds_closed = 0;
  uint64_t late_submissions = 0;
  uint64_t duplicates = 0;
  uint64_t refused = 0;
  uint64_t holds = 0;
  uint64_t hold_timeouts = 0;
  // Payload bytes of every LPS's accepted updates, and of one copy of each
  // round's answer (each LPS receives one).
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
};

// Write atomically; INTERNAL naming the path when they cannot.
absl::Status WriteLpsReport(const std::string& path, const LpsReport& report);
absl::Status WriteGlobalServerReport(const std::string& path,
                                     const GlobalServerReport& report);

// NOT_FOUND when there is no file (a server that was killed, or never
// started); INVALID_ARGUMENT naming the path when it is not such a report.
// Absent fields read as their defaults (a newer writer may add fields, an
// older one lack them).
absl::StatusOr<LpsReport> ReadLpsReport(const std::string& path);
absl::StatusOr<GlobalServerReport> ReadGlobalServerReport(
    const std::string& path);

}  // namespace tern::records

#endif  // TERN_COMMON_RECORDS_SERVER_REPORT_H_
