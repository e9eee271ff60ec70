// Port files: a server bound to port 0 tells others where it listens by
// writing the port to a file, atomically (write a temporary, then rename),
// so a reader polling for the file never sees it half-written.
#ifndef RL_COMMON_PORT_FILE_H_
#define RL_COMMON_PORT_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace rl {

// Writes `text` to `path + ".tmp"`, then renames it to `path`: a reader
// sees the old file or the whole new one. UNAVAILABLE naming the file.
absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view text);

// Does nothing for an empty `path`.
absl::Status WritePortFile(const std::string& path, int port);

// A TCP port on `host` that was free a moment ago (bound to port 0 and
// released), for a child that must come back on the same port after a
// restart.
absl::StatusOr<int> PickFreePort(const std::string& host = "127.0.0.1");

}  // namespace rl

#endif  // RL_COMMON_PORT_FILE_H_
