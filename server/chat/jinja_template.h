// A chat template (the Jinja program in a model's tokenizer_config.json "chat_template"
// or GGUF "tokenizer.chat_template"), parsed once and rendered per request exactly as
// Python's jinja2 3.1 renders it the way Hugging Face transformers configures it: an
// ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and the loopcontrols
// extension ({% break %}, {% continue %}), Hugging Face's tojson (json.dumps with
// ensure_ascii=False), raise_exception(message), strftime_now(format) and
// {% generation %}.
//
// What jinja2 has and this interpreter does not (template inheritance and includes, call
// blocks, recursive loops, a few filters such as wordwrap and groupby) is an error, at
// parse time where it can be seen there, never a silent difference.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace crossreg::jinja {

struct TemplateOptions {
  bool trim_blocks = true;    // drop the newline after a block or comment tag
  bool lstrip_blocks = true;  // drop spaces and tabs before a block or comment tag on its line
  size_t max_output_bytes = 8 << 20;  // also the largest string a render may build
  int64_t max_steps = 50'000'000;     // expression evaluations, loop iterations, 64-byte chunks of output
  int max_depth = 200;                // nesting of the source; macro calls while rendering
};

class Template {
 public:
  // INVALID_ARGUMENT "line L, column C: <what>" for a syntax error, and for a construct
  // this interpreter does not support ("line 3, column 12: the filter 'wordwrap' is not
  // supported"). Time linear in the source.
  static absl::StatusOr<Template> Parse(std::string_view source, const TemplateOptions& options = {});

  // The template rendered with the variables of `context`, a JSON object (messages,
  // tools, add_generation_prompt, bos_token, eos_token, ...). INVALID_ARGUMENT
  // "line L: <what>" when the template fails as jinja2 would (raise_exception(msg) gives
  // "line L: msg") or runs past a budget of its options. Safe to call from many threads.
  absl::StatusOr<std::string> Render(const nlohmann::ordered_json& context) const;

 private:
  struct Program;
  Template(std::shared_ptr<const Program> program, const TemplateOptions& options);

  std::shared_ptr<const Program> program_;  // immutable: copies of a Template share it
  TemplateOptions options_;
};

}  // namespace crossreg::jinja
