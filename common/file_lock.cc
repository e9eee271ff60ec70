#include "common/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace rl {
namespace {

std::string ReadAll(int fd) {
  std::string text;
  char buffer[512];
  if (::lseek(fd, 0, SEEK_SET) < 0) return text;
  ssize_t n;
  while ((n = ::read(fd, buffer, sizeof(buffer))) > 0 && text.size() < 4096) {
    text.append(buffer, static_cast<size_t>(n));
  }
  return std::string(absl::StripAsciiWhitespace(text));
}

}  // namespace

absl::StatusOr<FileLock> FileLock::Acquire(const std::string& path,
                                           absl::string_view holder) {
  const std::string lock_path = path + ".lock";
  const int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat(
        "cannot open the lock file ", lock_path, ": ", std::strerror(errno)));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const std::string held_by = ReadAll(fd);
    ::close(fd);
    if (error == EWOULDBLOCK) {
      return absl::FailedPreconditionError(absl::StrCat(
          path, " is in use by another process (",
          held_by.empty() ? "it has not said who it is" : held_by, "; ",
          lock_path, "): stop it first, or give another path"));
    }
    return absl::UnavailableError(
        absl::StrCat("cannot lock ", lock_path, ": ", std::strerror(error)));
  }
  FileLock lock(fd, lock_path);
  if (absl::Status written = lock.SetHolder(holder); !written.ok()) {
    return written;
  }
  return lock;
}

absl::Status FileLock::SetHolder(absl::string_view holder) {
  const std::string text = absl::StrCat(holder, "\n");
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, text.data(), text.size(), 0) !=
                                      static_cast<ssize_t>(text.size())) {
    return absl::UnavailableError(absl::StrCat(
        "cannot write the lock file ", lock_path_, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

FileLock::FileLock(FileLock&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      lock_path_(std::move(other.lock_path_)) {}

FileLock& FileLock::operator=(FileLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
    lock_path_ = std::move(other.lock_path_);
  }
  return *this;
}

FileLock::~FileLock() {
  // Closing the descriptor releases the lock; the file stays (removing it
  // could race with a process that just opened it to lock it).
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace rl
