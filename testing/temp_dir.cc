#include "testing/temp_dir.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace rl {

std::string MakeTestDir(absl::string_view name) {
  namespace fs = std::filesystem;
  const ::testing::TestInfo* info =
      ::testing::UnitTest::GetInstance()->current_test_info();
  std::string test = "no_test";
  if (info != nullptr) {
    test = absl::StrCat(info->test_suite_name(), ".", info->name());
    for (char& c : test) {
      if (c == '/') c = '_';  // parameterised tests
    }
  }
  const fs::path dir =
      fs::path(::testing::TempDir()) / test / std::string(name);
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);
  if (ec) {
    ADD_FAILURE() << "cannot make " << dir << ": " << ec.message();
    return "";
  }
  return dir.string();
}

std::string ReadTestFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
}

}  // namespace rl
