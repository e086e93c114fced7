#include "common/replace_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tern {
namespace {

absl::Status SystemError(absl::string_view action, absl::string_view path) {
  return absl::InternalError(
      absl::StrCat("cannot ", action, " '", path, "': ", std::strerror(errno)));
}

std::string DirectoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Opens `path` for writing, never through a symbolic link.
int OpenNoFollow(const std::string& path, int flags) {
  return ::open(path.c_str(), flags | O_NOFOLLOW | O_CLOEXEC, 0644);
}

absl::Status WriteAll(const std::string& path, absl::string_view bytes) {
  const int fd = OpenNoFollow(path, O_WRONLY | O_TRUNC);
  if (fd < 0) return SystemError("open", path);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const absl::Status failed = SystemError("write", path);
      ::close(fd);
      return failed;
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) return SystemError("close", path);
  return absl::OkStatus();
}

absl::Status Sync(const std::string& path) {
  const int fd = OpenNoFollow(path, O_RDONLY);
  if (fd < 0) return SystemError("open", path);
  const bool synced = ::fsync(fd) == 0;
  const absl::Status failed =
      synced ? absl::OkStatus() : SystemError("flush", path);
  ::close(fd);
  return failed;
}

std::string TemporaryOf(const std::string& path,
                        const ReplaceFileOptions& options) {
  return options.per_process_temporary ? absl::StrCat(path, ".tmp.", ::getpid())
                                       : absl::StrCat(path, ".tmp");
}

// Creates `temporary` empty, as a regular file of this process.
absl::Status CreateTemporary(const std::string& temporary) {
  const int fd = OpenNoFollow(temporary, O_WRONLY | O_CREAT | O_TRUNC);
  if (fd < 0) return SystemError("create", temporary);
  ::close(fd);
  return absl::OkStatus();
}

// The temporary, created empty; then written, flushed and renamed.
absl::Status WriteAndRename(
    const std::string& path, const std::string& temporary,
    const std::function<absl::Status(const std::string&)>& write, bool sync) {
  if (absl::Status created = CreateTemporary(temporary); !created.ok()) {
    return created;
  }
  if (absl::Status written = write(temporary); !written.ok()) return written;
  if (sync) {
    if (absl::Status synced = Sync(temporary); !synced.ok()) return synced;
  }
  if (::rename(temporary.c_str(), path.c_str()) != 0) {
    return SystemError("rename into place", path);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ReplaceFileBy(
    const std::string& path,
    const std::function<absl::Status(const std::string& temporary)>& write,
    const ReplaceFileOptions& options) {
  const std::string temporary = TemporaryOf(path, options);
  if (absl::Status status =
          WriteAndRename(path, temporary, write, options.sync);
      !status.ok()) {
    ::unlink(temporary.c_str());
    return status;
  }
  if (options.sync) {
    // Make the rename itself durable.
    const int dir_fd =
        ::open(DirectoryOf(path).c_str(), O_RDONLY | O_DIRECTORY);
    if (dir_fd >= 0) {
      ::fsync(dir_fd);
      ::close(dir_fd);
    }
  }
  return absl::OkStatus();
}

absl::Status CheckReplaceable(const std::string& path,
                              const ReplaceFileOptions& options) {
  const std::string temporary = TemporaryOf(path, options);
  const absl::Status created = CreateTemporary(temporary);
  ::unlink(temporary.c_str());
  return created;
}

absl::Status ReplaceFile(const std::string& path, absl::string_view bytes,
                         const ReplaceFileOptions& options) {
  return ReplaceFileBy(
      path,
      [bytes](const std::string& temporary) {
        return WriteAll(temporary, bytes);
      },
      options);
}

}  // namespace tern
