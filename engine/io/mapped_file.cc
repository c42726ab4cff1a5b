#include "engine/io/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace crossreg {
namespace {

absl::Status ErrnoError(const std::string& what, const std::string& path, int err) {
  const std::string message = absl::StrCat(what, " ", path, ": ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(message);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(message);
  return absl::InternalError(message);
}

}  // namespace

absl::StatusOr<std::shared_ptr<MappedFile>> MappedFile::Open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO planted where a file is expected must not hang; it is
  // refused below as not a regular file. Regular files ignore the flag.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return ErrnoError("cannot open", path, errno);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return ErrnoError("cannot stat", path, err);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat("not a regular file: ", path));
  }
  const size_t size = static_cast<size_t>(st.st_size);
  const unsigned char* data = nullptr;
  // mmap of length 0 is an error; an empty file is simply an empty view.
  if (size > 0) {
    void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return ErrnoError("cannot mmap", path, err);
    }
    data = static_cast<const unsigned char*>(p);
  }
  ::close(fd);  // the mapping stays valid without the descriptor
  return std::shared_ptr<MappedFile>(new MappedFile(path, data, size));
}

std::shared_ptr<MappedFile> MappedFile::FromBytes(std::string name, std::string_view bytes) {
  // operator new[] aligns to at least 16 bytes on the 64-bit targets crossreg builds for.
  auto owned = std::make_unique<unsigned char[]>(bytes.empty() ? 1 : bytes.size());
  if (!bytes.empty()) std::memcpy(owned.get(), bytes.data(), bytes.size());
  std::shared_ptr<MappedFile> file(new MappedFile(std::move(name), owned.get(), bytes.size()));
  file->owned_ = std::move(owned);
  return file;
}

MappedFile::~MappedFile() {
  if (owned_ == nullptr && data_ != nullptr && size_ > 0) {
    ::munmap(const_cast<unsigned char*>(data_), size_);
  }
}

}  // namespace crossreg
