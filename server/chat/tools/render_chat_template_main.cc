// crossreg-render-chat-template TEMPLATE_FILE CONTEXT_JSON_FILE
//
// Renders a chat template (raw Jinja text) with a JSON context (an object: messages,
// tools, add_generation_prompt, bos_token, ...) and writes the exact bytes to stdout;
// tests/chat/test_jinja_parity.py compares them with Python's jinja2. A template error
// goes to stderr with exit status 2; a usage or file error exits 1.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "nlohmann/json.hpp"
#include "server/chat/jinja_template.h"

namespace {

bool ReadFile(const char* path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream buffer;
  buffer << in.rdbuf();
  *out = buffer.str();
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: crossreg-render-chat-template TEMPLATE_FILE CONTEXT_JSON_FILE\n";
    return 1;
  }
  std::string source;
  std::string context_text;
  if (!ReadFile(argv[1], &source)) {
    std::cerr << "cannot read " << argv[1] << "\n";
    return 1;
  }
  if (!ReadFile(argv[2], &context_text)) {
    std::cerr << "cannot read " << argv[2] << "\n";
    return 1;
  }
  const auto context = nlohmann::ordered_json::parse(context_text, nullptr, /*allow_exceptions=*/false);
  if (context.is_discarded()) {
    std::cerr << argv[2] << " is not valid JSON\n";
    return 1;
  }
  auto parsed = crossreg::jinja::Template::Parse(source);
  if (!parsed.ok()) {
    std::cerr << parsed.status().message() << "\n";
    return 2;
  }
  auto rendered = parsed->Render(context);
  if (!rendered.ok()) {
    std::cerr << rendered.status().message() << "\n";
    return 2;
  }
  std::fwrite(rendered->data(), 1, rendered->size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}
