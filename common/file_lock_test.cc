#include "common/file_lock.h"

#include <sys/wait.h>
#include <unistd.h>

#include <optional>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"
#include "testing/temp_dir.h"

namespace rl {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

TEST(FileLockTest, OneHolderAtATimeNamedToTheOthers) {
  const std::string store = MakeTestDir() + "/coordinator.db";
  std::optional<FileLock> first;
  {
    absl::StatusOr<FileLock> taken =
        FileLock::Acquire(store, "coordinator pid 1 on 127.0.0.1:0");
    ASSERT_OK(taken);
    first.emplace(*std::move(taken));
  }
  ASSERT_OK(first->SetHolder("coordinator pid 1 on 127.0.0.1:50051"));
  // A second holder (another open file: as another process) is refused,
  // told who holds it.
  EXPECT_THAT(FileLock::Acquire(store, "coordinator pid 2"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr(store + " is in use"),
                             HasSubstr("coordinator pid 1 on "
                                       "127.0.0.1:50051"))));
  // So is a child process.
  const pid_t child = fork();
  if (child == 0) _exit(FileLock::Acquire(store, "child").ok() ? 0 : 3);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_EQ(WEXITSTATUS(status), 3);
  // Released with its holder: the next one takes it.
  first.reset();
  EXPECT_OK(FileLock::Acquire(store, "coordinator pid 3").status());
}

}  // namespace
}  // namespace rl
