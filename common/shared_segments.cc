#include "common/shared_segments.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status.h"

namespace rl {
namespace {

constexpr char kPrefix[] = "rl-segments-";
constexpr char kMemfdLink[] = "/memfd:";
constexpr char kMagic[8] = {'R', 'L', 'S', 'E', 'G', '0', '1', '\0'};
constexpr int kTokenChars = 32;
// magic (8), token (32), slot (4), zeros.
constexpr int64_t kHeaderBytes = 64;
constexpr int kMaxSlots = 64;
// Slots grow in steps of this, so that segments of one run (all alike)
// fit the first size.
constexpr int64_t kGrowStep = 1 << 20;

struct Header {
  char magic[8];
  char token[kTokenChars];
  int32_t slot;
  char zeros[kHeaderBytes - 8 - kTokenChars - 4];
};
static_assert(sizeof(Header) == kHeaderBytes);

// The memfd's name, as /proc/<pid>/fd/<fd> shows it after "/memfd:".
std::string SlotName(absl::string_view token, int slot) {
  return absl::StrCat(kPrefix, token, "-", slot);
}

absl::Status ErrnoStatus(int error, absl::string_view what) {
  const std::string message = absl::StrCat(what, ": ", std::strerror(error));
  switch (error) {
    case ENOENT:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    case ENOSPC:
    case EMFILE:
    case ENFILE:
    case ENOMEM:
      return absl::ResourceExhaustedError(message);
    default:
      return absl::InternalError(message);
  }
}

// Reads exactly `length` bytes at `offset`; the bytes read if fewer.
absl::StatusOr<int64_t> ReadAt(int fd, char* out, int64_t length,
                               int64_t offset) {
  int64_t done = 0;
  while (done < length) {
    const ssize_t n = pread(fd, out + done, length - done, offset + done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "reading shared memory");
    }
    if (n == 0) break;
    done += n;
  }
  return done;
}

// `link` (a /proc/.../fd/N) names the memfd `expected` ("/memfd:<name>").
absl::Status CheckLink(const std::string& link, const std::string& expected,
                       bool before_open) {
  char target[512];
  const ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
  if (n < 0) {
    return ErrnoStatus(
        errno, absl::StrCat("shared segments: ", link,
                            errno == ENOENT && before_open
                                ? " (the sender is on another host, or in "
                                  "another PID namespace)"
                                : ""));
  }
  const absl::string_view name(target, n);
  if (!absl::StartsWith(name, expected) ||
      (name.size() > expected.size() && name[expected.size()] != ' ')) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shared segments: ", link, " is ", name, ", not ", expected,
        before_open ? " (the sender is on another host?)" : ""));
  }
  return absl::OkStatus();
}

bool IsToken(absl::string_view token) {
  return token.size() == kTokenChars &&
         std::all_of(token.begin(), token.end(), [](char c) {
           return absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f');
         });
}

}  // namespace

SharedSegmentWriter::SharedSegmentWriter(int slots) : slots_(slots) {}

absl::StatusOr<std::unique_ptr<SharedSegmentWriter>>
SharedSegmentWriter::Create(const Options& options) {
  if (options.slots < 1 || options.slots > kMaxSlots) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared segments: slots must be in [1, ", kMaxSlots,
                     "] (got ", options.slots, ")"));
  }
  char random[kTokenChars / 2];
  if (getrandom(random, sizeof(random), 0) != sizeof(random)) {
    return ErrnoStatus(errno, "shared segments: getrandom");
  }
  std::string token =
      absl::BytesToHexString(absl::string_view(random, sizeof(random)));
  // Made first, so that its destructor closes what was made if a later
  // slot fails.
  std::unique_ptr<SharedSegmentWriter> writer(
      new SharedSegmentWriter(options.slots));
  std::vector<int> fds;
  absl::MutexLock lock(&writer->mu_);
  for (int i = 0; i < options.slots; ++i) {
    const std::string name = SlotName(token, i);
    const int fd = memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
      return ErrnoStatus(errno,
                         absl::StrCat("shared segments: memfd_create ", name));
    }
    writer->slots_[i].fd = fd;
    fds.push_back(fd);
    Header header{};
    std::memcpy(header.magic, kMagic, sizeof(kMagic));
    std::memcpy(header.token, token.data(), kTokenChars);
    header.slot = i;
    const ssize_t written = pwrite(fd, &header, sizeof(header), 0);
    if (written != sizeof(header)) {
      return written < 0
                 ? ErrnoStatus(errno,
                               absl::StrCat("shared segments: writing ", name))
                 : absl::InternalError(absl::StrCat("shared segments: writing ",
                                                    name, ": ", written, " of ",
                                                    sizeof(header), " bytes"));
    }
    // A receiver maps the slot: it may grow, never shrink under it.
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_SEAL) != 0) {
      return ErrnoStatus(errno,
                         absl::StrCat("shared segments: sealing ", name));
    }
  }
  writer->offer_ =
      absl::StrCat(getpid(), ":", token, ":", absl::StrJoin(fds, ","));
  return writer;
}

SharedSegmentWriter::~SharedSegmentWriter() {
  absl::MutexLock lock(&mu_);
  for (Slot& slot : slots_) {
    if (slot.map != nullptr) munmap(slot.map, slot.mapped);
    if (slot.fd >= 0) close(slot.fd);
  }
}

absl::Status SharedSegmentWriter::Grow(int index, int64_t bytes) {
  Slot& slot = slots_[index];
  const int64_t need = kHeaderBytes + bytes;
  if (slot.mapped >= need) return absl::OkStatus();
  const int64_t size = (need + kGrowStep - 1) / kGrowStep * kGrowStep;
  // Reserves the pages now: without memory this fails, where a write
  // through the mapping would raise SIGBUS.
  if (const int error = posix_fallocate(slot.fd, 0, size); error != 0) {
    return ErrnoStatus(error, absl::StrCat("shared segments: reserving ", size,
                                           " bytes for slot ", index));
  }
  if (slot.map != nullptr) {
    munmap(slot.map, slot.mapped);
    slot.map = nullptr;
    slot.mapped = 0;
  }
  void* map =
      mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, slot.fd, 0);
  if (map == MAP_FAILED) {
    return ErrnoStatus(errno,
                       absl::StrCat("shared segments: mapping slot ", index));
  }
  slot.map = static_cast<uint8_t*>(map);
  slot.mapped = size;
  return absl::OkStatus();
}

absl::StatusOr<SharedSlotRef> SharedSegmentWriter::Write(
    int64_t sequence_number, int64_t bytes,
    const std::function<void(uint8_t*)>& fill) {
  if (bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared segments: bytes must be >= 0 (got ", bytes, ")"));
  }
  uint8_t* data = nullptr;
  int index = -1;
  {
    absl::MutexLock lock(&mu_);
    for (size_t i = 0; i < slots_.size(); ++i) {
      if (!slots_[i].busy) {
        index = static_cast<int>(i);
        break;
      }
    }
    if (index < 0) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "shared segments: all ", slots_.size(), " slots are in flight"));
    }
    if (absl::Status grown = Grow(index, bytes); !grown.ok()) {
      return absl::ResourceExhaustedError(grown.message());
    }
    slots_[index].busy = true;
    slots_[index].sequence_number = sequence_number;
    data = slots_[index].map + kHeaderBytes;
  }
  // Outside the lock: the slot is this caller's until Release.
  fill(data);
  return SharedSlotRef{index, bytes};
}

void SharedSegmentWriter::Release(int64_t acked_sequence_number) {
  absl::MutexLock lock(&mu_);
  for (Slot& slot : slots_) {
    if (slot.busy && slot.sequence_number <= acked_sequence_number) {
      slot.busy = false;
    }
  }
}

int SharedSegmentWriter::free_slots() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(
      std::count_if(slots_.begin(), slots_.end(),
                    [](const Slot& slot) { return !slot.busy; }));
}

SharedSegmentReader::SharedSegmentReader(std::string name,
                                         std::vector<Slot> slots,
                                         int64_t max_length)
    : name_(std::move(name)),
      slots_(std::move(slots)),
      max_length_(max_length) {}

SharedSegmentReader::~SharedSegmentReader() {
  for (Slot& slot : slots_) {
    if (slot.map != nullptr) {
      munmap(const_cast<uint8_t*>(slot.map), slot.mapped);
    }
    close(slot.fd);
  }
}

absl::StatusOr<std::unique_ptr<SharedSegmentReader>> SharedSegmentReader::Open(
    absl::string_view offer, int64_t max_length) {
  const std::vector<absl::string_view> parts = absl::StrSplit(offer, ':');
  int pid = 0;
  std::vector<int> fds;
  bool well_formed = parts.size() == 3 && absl::SimpleAtoi(parts[0], &pid) &&
                     pid > 0 && IsToken(parts[1]);
  if (well_formed) {
    for (absl::string_view field : absl::StrSplit(parts[2], ',')) {
      int fd = -1;
      well_formed &= absl::SimpleAtoi(field, &fd) && fd >= 0;
      fds.push_back(fd);
    }
    well_formed &= !fds.empty() && fds.size() <= kMaxSlots;
  }
  if (!well_formed) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shared segments offer \"", offer, "\": not <pid>:<", kTokenChars,
        " hex digits>:<fd>,... with 1 to ", kMaxSlots, " descriptors"));
  }
  const absl::string_view token = parts[1];
  if (max_length < 0 || max_length > std::numeric_limits<int>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared segments: max_length must be in [0, 2^31) (got ",
                     max_length, ")"));
  }
  std::vector<Slot> slots;
  auto fail = [&slots](absl::Status status) {
    for (const Slot& slot : slots) close(slot.fd);
    return status;
  };
  auto fail_if = [&fail](absl::Status status) {
    return status.ok() ? status : fail(std::move(status));
  };
  for (int i = 0; i < static_cast<int>(fds.size()); ++i) {
    const std::string link = absl::StrCat("/proc/", pid, "/fd/", fds[i]);
    // The name first: what is not the offer's memfd is not opened (a FIFO,
    // a device of an unrelated process with that number elsewhere). The
    // sender could swap the descriptor before the open: the open neither
    // blocks nor takes a terminal, and what it opened is checked again.
    const std::string expected = absl::StrCat(kMemfdLink, SlotName(token, i));
    RETURN_IF_ERROR(fail_if(CheckLink(link, expected, /*before_open=*/true)));
    const int fd =
        open(link.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
      return fail(
          ErrnoStatus(errno, absl::StrCat("shared segments: opening ", link)));
    }
    slots.push_back(Slot{fd});
    RETURN_IF_ERROR(fail_if(CheckLink(absl::StrCat("/proc/self/fd/", fd),
                                      expected, /*before_open=*/false)));
    struct stat info;
    const int seals = fcntl(fd, F_GET_SEALS);
    if (fstat(fd, &info) != 0 || !S_ISREG(info.st_mode) || seals < 0 ||
        (seals & F_SEAL_SHRINK) == 0) {
      return fail(absl::InvalidArgumentError(
          absl::StrCat("shared segments: ", link,
                       " is not a memfd sealed against shrinking")));
    }
    Header header;
    absl::StatusOr<int64_t> read =
        ReadAt(fd, reinterpret_cast<char*>(&header), sizeof(header), 0);
    if (!read.ok()) return fail(read.status());
    if (*read != kHeaderBytes ||
        std::memcmp(header.magic, kMagic, sizeof(kMagic)) != 0 ||
        absl::string_view(header.token, kTokenChars) != token ||
        header.slot != i) {
      return fail(absl::InvalidArgumentError(
          absl::StrCat("shared segments: ", link,
                       " does not start with the header a sender writes")));
    }
  }
  return std::unique_ptr<SharedSegmentReader>(new SharedSegmentReader(
      absl::StrCat("process ", pid), std::move(slots), max_length));
}

absl::StatusOr<absl::string_view> SharedSegmentReader::View(
    const SharedSlotRef& ref, absl::string_view what) {
  if (ref.slot < 0 || ref.slot >= slots()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ".slot: ", ref.slot,
                                                   " is not in [0, ", slots(),
                                                   ") (the slots offered)"));
  }
  if (ref.length < 0 || ref.length > max_length_) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ".length: ", ref.length, " bytes, not in [0, ",
                     max_length_, "]"));
  }
  Slot& slot = slots_[ref.slot];
  const int64_t need = kHeaderBytes + ref.length;
  if (slot.mapped < need) {
    // The slot cannot shrink (sealed): all of its size now stays readable.
    struct stat info;
    if (fstat(slot.fd, &info) != 0) {
      return ErrnoStatus(errno, "shared segments: fstat");
    }
    if (info.st_size < need) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ".length: ", ref.length, " bytes announced, slot ", ref.slot,
          " holds ", std::max<int64_t>(0, info.st_size - kHeaderBytes)));
    }
    if (slot.map != nullptr) {
      munmap(const_cast<uint8_t*>(slot.map), slot.mapped);
      slot.map = nullptr;
      slot.mapped = 0;
    }
    // No more than a message can need, however large the sender made it.
    const int64_t size =
        std::min<int64_t>(info.st_size, kHeaderBytes + max_length_);
    void* map = mmap(nullptr, size, PROT_READ, MAP_SHARED, slot.fd, 0);
    if (map == MAP_FAILED) {
      return ErrnoStatus(
          errno, absl::StrCat("shared segments: mapping slot ", ref.slot));
    }
    slot.map = static_cast<const uint8_t*>(map);
    slot.mapped = size;
  }
  return absl::string_view(
      reinterpret_cast<const char*>(slot.map) + kHeaderBytes, ref.length);
}

}  // namespace rl
