#include "common/process/role_test_support.h"

#include <dirent.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/support/byte_buffer.h"

namespace tern::process {

std::string TestTempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::string ReadWholeFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> FilesWith(const std::string& dir,
                                   const std::string& part) {
  std::vector<std::string> names;
  if (DIR* handle = opendir(dir.c_str()); handle != nullptr) {
    while (const dirent* entry = readdir(handle)) {
      const std::string name = entry->d_name;
      if (name.find(part) != std::string::npos) names.push_back(name);
    }
    closedir(handle);
  }
  return names;
}

int WaitForPortFile(const std::string& port_file, absl::Duration timeout) {
  const absl::Time give_up = absl::Now() + timeout;
  while (absl::Now() < give_up) {
    const std::string text = ReadWholeFile(port_file);
    if (text.empty()) {
      absl::SleepFor(absl::Milliseconds(10));
      continue;
    }
    // Written whole (a rename), so a file that is there is complete.
    int port = 0;
    if (text.back() != '\n' ||
        !absl::SimpleAtoi(text.substr(0, text.size() - 1), &port)) {
      return 0;
    }
    return port;
  }
  return 0;
}

std::string HealthCheck(const std::shared_ptr<grpc::Channel>& channel) {
  grpc::GenericStub health_client(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  // An empty HealthCheckRequest: the whole server.
  grpc::Slice empty("");
  const grpc::ByteBuffer request(&empty, 1);
  grpc::ByteBuffer response;
  absl::Notification done;
  grpc::Status status;
  health_client.UnaryCall(&context, "/grpc.health.v1.Health/Check",
                          grpc::StubOptions(), &request, &response,
                          [&](grpc::Status s) {
                            status = std::move(s);
                            done.Notify();
                          });
  done.WaitForNotification();
  if (!status.ok()) return absl::StrCat("error: ", status.error_message());
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return "error: unreadable";
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return bytes;
}

}  // namespace tern::process
