#include "common/grpc_message.h"

#include <climits>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "grpcpp/support/slice.h"

namespace rl {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::MessageLite;
using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;

// Collects what protobuf's serialiser writes as a list of slices: the bytes
// it writes itself (tags, lengths, small fields) into header blocks, and the
// large fields it offers through WriteAliasedRaw as slices of their own.
class AliasingWriter final : public google::protobuf::io::ZeroCopyOutputStream {
 public:
  explicit AliasingWriter(std::shared_ptr<const MessageLite> owner)
      : owner_(std::move(owner)) {}
  ~AliasingWriter() override { delete[] block_; }

  bool Next(void** data, int* size) override {
    Seal();
    block_ = new char[kAliasMinBytes];
    used_ = kAliasMinBytes;
    *data = block_;
    *size = static_cast<int>(kAliasMinBytes);
    bytes_ += kAliasMinBytes;
    return true;
  }
  void BackUp(int count) override {
    used_ -= count;
    bytes_ -= count;
  }
  int64_t ByteCount() const override { return bytes_; }
  bool AllowsAliasing() const override { return true; }
  bool WriteAliasedRaw(const void* data, int size) override {
    Seal();
    // The slice's own reference to the message, dropped when gRPC and every
    // copy of the buffer are done with the slice.
    slices_.emplace_back(
        const_cast<void*>(data), static_cast<size_t>(size),
        [](void* owner) {
          delete static_cast<std::shared_ptr<const MessageLite>*>(owner);
        },
        new std::shared_ptr<const MessageLite>(owner_));
    bytes_ += size;
    return true;
  }

  grpc::ByteBuffer Finish() {
    Seal();
    return grpc::ByteBuffer(slices_.data(), slices_.size());
  }

 private:
  // Turns the current header block into a slice of the bytes written to it.
  void Seal() {
    if (block_ == nullptr) return;
    if (used_ > 0) {
      slices_.emplace_back(block_, used_, [](void* block) {
        delete[] static_cast<char*>(block);
      });
    } else {
      delete[] block_;
    }
    block_ = nullptr;
    used_ = 0;
  }

  const std::shared_ptr<const MessageLite> owner_;
  std::vector<grpc::Slice> slices_;
  char* block_ = nullptr;  // owned until sealed into a slice
  size_t used_ = 0;
  int64_t bytes_ = 0;
};

bool IsUtf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = s[i];
    int more;
    uint32_t code;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      more = 1;
      code = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      more = 2;
      code = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      more = 3;
      code = c & 0x07;
    } else {
      return false;
    }
    if (i + more >= s.size()) return false;  // cut short
    for (int k = 1; k <= more; ++k) {
      const unsigned char next = s[i + k];
      if ((next & 0xC0) != 0x80) return false;
      code = (code << 6) | (next & 0x3F);
    }
    // Overlong forms, surrogates and code points past U+10FFFF.
    static constexpr uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
    if (code < kMin[more] || code > 0x10FFFF ||
        (code >= 0xD800 && code <= 0xDFFF)) {
      return false;
    }
    i += more + 1;
  }
  return true;
}

// The first fault in the fields of one message of `type` (up to the stream's
// current limit), as "<path>.<field>: ...", or nothing if its top-level
// framing is sound. Run only after a parse failed, to say where.
std::optional<std::string> FindFault(CodedInputStream& in,
                                     const Descriptor* type,
                                     const std::string& path, int depth) {
  std::map<int, int> repeated_seen;
  while (true) {
    const int at = in.CurrentPosition();
    const uint32_t tag = in.ReadTag();
    if (tag == 0) {
      if (in.BytesUntilLimit() == 0) return std::nullopt;
      return absl::StrCat(path, ": byte ", at, " does not start a field");
    }
    const int number = WireFormatLite::GetTagFieldNumber(tag);
    const FieldDescriptor* field =
        type == nullptr ? nullptr : type->FindFieldByNumber(number);
    std::string name = field == nullptr
                           ? absl::StrCat(path, ".<field ", number, ">")
                           : absl::StrCat(path, ".", field->name());
    if (field != nullptr && field->is_repeated() &&
        field->type() == FieldDescriptor::TYPE_MESSAGE) {
      absl::StrAppend(&name, "[", repeated_seen[number]++, "]");
    }
    const std::string cut_short =
        absl::StrCat(name, ": cut short at byte ", at);
    switch (WireFormatLite::GetTagWireType(tag)) {
      case WireFormatLite::WIRETYPE_VARINT: {
        uint64_t value;
        if (!in.ReadVarint64(&value)) return cut_short;
        break;
      }
      case WireFormatLite::WIRETYPE_FIXED64: {
        uint64_t value;
        if (!in.ReadLittleEndian64(&value)) return cut_short;
        break;
      }
      case WireFormatLite::WIRETYPE_FIXED32: {
        uint32_t value;
        if (!in.ReadLittleEndian32(&value)) return cut_short;
        break;
      }
      case WireFormatLite::WIRETYPE_LENGTH_DELIMITED: {
        uint32_t length;
        if (!in.ReadVarint32(&length)) return cut_short;
        const int left = in.BytesUntilLimit();
        if (length > static_cast<uint32_t>(left)) {
          return absl::StrCat(name, ": declares ", length, " bytes at byte ",
                              at, ", ", left, " remain");
        }
        if (field != nullptr &&
            field->type() == FieldDescriptor::TYPE_MESSAGE && depth < 64) {
          const CodedInputStream::Limit limit = in.PushLimit(length);
          std::optional<std::string> fault =
              FindFault(in, field->message_type(), name, depth + 1);
          if (fault.has_value()) return fault;
          in.PopLimit(limit);
        } else if (field != nullptr &&
                   field->type() == FieldDescriptor::TYPE_STRING) {
          std::string value;
          if (!in.ReadString(&value, length)) return cut_short;
          if (!IsUtf8(value)) return absl::StrCat(name, ": not valid UTF-8");
        } else if (!in.Skip(length)) {
          return cut_short;
        }
        break;
      }
      default:
        return absl::StrCat(name, ": wire type ",
                            WireFormatLite::GetTagWireType(tag), " at byte ",
                            at, " is not valid here");
    }
  }
}

}  // namespace

grpc::ByteBuffer SerializeAliased(std::shared_ptr<const MessageLite> message) {
  message->ByteSizeLong();  // caches the sizes that serialising reads
  AliasingWriter writer(message);
  {
    google::protobuf::io::CodedOutputStream out(&writer);
    out.EnableAliasing(true);
    message->SerializeWithCachedSizes(&out);
  }  // flushed into `writer` here
  return writer.Finish();
}

grpc::ByteBuffer SerializeCopy(const MessageLite& message) {
  auto* bytes = new std::string(message.SerializeAsString());
  grpc::Slice slice(
      bytes->data(), bytes->size(),
      [](void* owner) { delete static_cast<std::string*>(owner); }, bytes);
  return grpc::ByteBuffer(&slice, 1);
}

absl::Status ParseByteBuffer(grpc::ByteBuffer* buffer,
                             google::protobuf::Message* message,
                             absl::string_view what) {
  message->Clear();
  if (!buffer->Valid()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": no payload"));
  }
  {
    grpc::ProtoBufferReader reader(buffer);
    if (reader.status().ok() && message->ParseFromZeroCopyStream(&reader)) {
      return absl::OkStatus();
    }
  }
  message->Clear();
  const size_t size = buffer->Length();
  std::optional<std::string> fault;
  if (size <= INT_MAX) {
    grpc::ProtoBufferReader reader(buffer);
    CodedInputStream in(&reader);
    in.SetTotalBytesLimit(INT_MAX);
    in.PushLimit(static_cast<int>(size));
    fault = FindFault(in, message->GetDescriptor(), std::string(what), 0);
  }
  return absl::InvalidArgumentError(
      fault.has_value() ? *fault
                        : absl::StrCat(what, ": not a valid ",
                                       message->GetDescriptor()->full_name(),
                                       " (", size, " bytes)"));
}

}  // namespace rl
