// Replacing a file so that a reader, or a crash, finds the old bytes or the
// new ones, never a part: the new bytes go to a temporary file beside it,
// which is then renamed over it. One way to do it for every file tern
// rewrites: checkpoints and shard state (common/framed_file.h), port files,
// JSON records and reports, the trained model (worker/model_export.h).
//
// The temporary is created as a regular file of this process before anything
// is written to it; a symbolic link at its name is refused, not followed, so
// that one planted in a directory others can write to cannot have this
// process (often root) overwrite what it points to. A failed replacement
// removes the temporary (a planted link included) and leaves `path` as it
// was.
#ifndef TERN_COMMON_REPLACE_FILE_H_
#define TERN_COMMON_REPLACE_FILE_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace tern {

struct ReplaceFileOptions {
  // The temporary is `path`.tmp where one process writes the file, and
  // `path`.tmp.<pid> where several may write it at once.
  bool per_process_temporary = false;
  // fsync the temporary before the rename and the directory after it: the
  // new bytes survive a machine crash, not only the process's.
  bool sync = false;
};

// Replaces `path` with `bytes`. INTERNAL naming the file and the system's
// reason: "cannot create 'P.tmp': Too many levels of symbolic links",
// "cannot write ...", "cannot flush ...", "cannot rename into place 'P'".
absl::Status ReplaceFile(const std::string& path, absl::string_view bytes,
                         const ReplaceFileOptions& options);

// The same for a writer that opens a file by name (libtorch's): `write` gets
// the temporary's name, created empty, and fills it; its error is returned
// as it is.
absl::Status ReplaceFileBy(
    const std::string& path,
    const std::function<absl::Status(const std::string& temporary)>& write,
    const ReplaceFileOptions& options);

// Tries now what a replacement of `path` will need first, creating its
// temporary, and removes it again: for a file written only at the end of
// long work. The same errors as ReplaceFile's "cannot create".
absl::Status CheckReplaceable(const std::string& path,
                              const ReplaceFileOptions& options);

}  // namespace tern

#endif  // TERN_COMMON_REPLACE_FILE_H_
