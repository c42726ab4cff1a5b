// Command-line setup shared by the client programs.
#pragma once

namespace crossreg::clients {

// Parses the command line: flag names may be written with dashes (--max-tokens),
// --stop may be repeated, --max_new_tokens (crossreg-generate's name) means
// --max_tokens, and --help lists the flags defined under clients/. `usage` is the
// text --help prints first. Exits with status 2 on unexpected positional arguments.
void ParseClientCommandLine(int argc, char** argv, const char* usage);

}  // namespace crossreg::clients
