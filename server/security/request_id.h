// Ids for requests that come without one: 128 random bits from the kernel's CSPRNG,
// as 32 hex digits. Sequential ids ("req-1", "req-2") let anyone who could reach
// Abort enumerate and cancel other clients' streams; these cannot be guessed.
#pragma once

#include <string>

namespace crossreg::server {

std::string RandomRequestId();

}  // namespace crossreg::server
