// Test support for the tests of the process plumbing and of a role's main
// (common/process/process_test.cc, server/ps_main_test.cc,
// global/gs_main_test.cc): the test's temporary directory, a file's text,
// the role's port file, its health and the files it left behind.
#ifndef TERN_COMMON_PROCESS_ROLE_TEST_SUPPORT_H_
#define TERN_COMMON_PROCESS_ROLE_TEST_SUPPORT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "grpcpp/channel.h"

namespace tern::process {

// The test's temporary directory (TEST_TMPDIR, else /tmp).
std::string TestTempDir();

// The file's whole text; "" when it cannot be read.
std::string ReadWholeFile(const std::string& path);

// Names in `dir` that contain `part`.
std::vector<std::string> FilesWith(const std::string& dir,
                                   const std::string& part);

// The port a role wrote to `port_file` ("<port>\n", common/process/
// port_file.h), waiting up to `timeout` for it; 0 when none came, or when
// the file holds anything else.
int WaitForPortFile(const std::string& port_file,
                    absl::Duration timeout = absl::Seconds(30));

// grpc.health.v1.Health/Check for the whole server, over gRPC's generic
// client (Debian ships no generated health client): the answer's bytes,
// std::string("\x08\x01", 2) for SERVING, or "error: <message>".
std::string HealthCheck(const std::shared_ptr<grpc::Channel>& channel);

}  // namespace tern::process

#endif  // TERN_COMMON_PROCESS_ROLE_TEST_SUPPORT_H_
