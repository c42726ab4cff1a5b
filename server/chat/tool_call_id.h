// Ids for the tool calls a response carries, in OpenAI's shape: the client echoes one back
// with the tool's result (a "tool" message's tool_call_id), so ids must not repeat.
#pragma once

#include <string>

namespace crossreg::chat {

// "call_" and 24 characters from [A-Za-z0-9], from a per-thread generator seeded by
// std::random_device (about 143 bits: collisions are not a concern).
std::string RandomToolCallId();

}  // namespace crossreg::chat
