#include "coordinator/registration_check.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/json_quote.h"
#include "common/status.h"

namespace rl {
namespace {

// INVALID_ARGUMENT naming `field` unless `value` has 1 to `max_bytes`
// bytes, each of them in `allowed` (or alphanumeric): what a worker
// registers is shown to operators and written to logs.
absl::Status CheckWorkerField(absl::string_view field, absl::string_view value,
                              size_t max_bytes, absl::string_view allowed) {
  bool ok = !value.empty() && value.size() <= max_bytes;
  for (size_t i = 0; ok && i < value.size(); ++i) {
    ok = absl::ascii_isalnum(value[i]) ||
         allowed.find(value[i]) != absl::string_view::npos;
  }
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      field, ": 1 to ", max_bytes, " bytes of letters, digits and \"", allowed,
      "\" (got ", QuoteForError(value), ")"));
}

}  // namespace

absl::Status CheckRegistration(const RegisterWorkerRequest& request) {
  constexpr absl::string_view kNameCharacters = "._-:@/[]";
  constexpr absl::string_view kAddressCharacters = "._-:[]%";
  RETURN_IF_ERROR(CheckWorkerField("worker_name", request.worker_name(), 128,
                                   kNameCharacters));
  for (const auto& [field, address] :
       {std::pair<const char*, const std::string*>{"address",
                                                   &request.address()},
        {"rendezvous_address", &request.rendezvous_address()}}) {
    if (address->empty()) continue;
    RETURN_IF_ERROR(CheckWorkerField(field, *address, 256, kAddressCharacters));
  }
  const auto& devices = request.capabilities().devices();
  if (devices.size() > 64) {
    return absl::InvalidArgumentError(absl::StrCat(
        "capabilities.devices: at most 64 (got ", devices.size(), ")"));
  }
  for (const std::string& device : devices) {
    RETURN_IF_ERROR(
        CheckWorkerField("capabilities.devices", device, 32, ":_-"));
  }
  return absl::OkStatus();
}

}  // namespace rl
