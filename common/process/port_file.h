// --port_file: how a server started on port 0 tells its supervisor (tern
// launch, a test, a script) which port it bound.
#ifndef TERN_COMMON_PROCESS_PORT_FILE_H_
#define TERN_COMMON_PROCESS_PORT_FILE_H_

#include <string>

#include "absl/status/status.h"

namespace tern::process {

// Writes "<port>\n" to `path` atomically (a temporary file in the same
// directory, then rename), so a reader never sees a partial file.
// INVALID_ARGUMENT naming --port_file when it cannot be written.
absl::Status WritePortFile(const std::string& path, int port);

}  // namespace tern::process

#endif  // TERN_COMMON_PROCESS_PORT_FILE_H_
