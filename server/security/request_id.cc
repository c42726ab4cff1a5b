#include "server/security/request_id.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace crossreg::server {

std::string RandomRequestId() {
  uint8_t bytes[16];
  size_t filled = 0;
  while (filled < sizeof(bytes)) {
    const ssize_t n = getrandom(bytes + filled, sizeof(bytes) - filled, 0);
    if (n > 0) {
      filled += static_cast<size_t>(n);
    } else if (errno != EINTR) {
      // Linux >= 3.17 always has getrandom; without entropy there is no safe id.
      std::perror("getrandom");
      std::abort();
    }
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(32, '0');
  for (size_t i = 0; i < sizeof(bytes); ++i) {
    id[2 * i] = kHex[bytes[i] >> 4];
    id[2 * i + 1] = kHex[bytes[i] & 15];
  }
  return id;
}

}  // namespace crossreg::server
