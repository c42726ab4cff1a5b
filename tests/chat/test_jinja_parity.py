"""Parity of crossreg's chat template interpreter (server/chat/) with Python's jinja2 as
Hugging Face transformers configures it: every template of ../shared/testdata/chat_templates
(and any raw template files listed, colon-separated, in CROSSREG_EXTRA_CHAT_TEMPLATES) over
a set of conversations must render byte-identical, or fail on both sides (with the
raise_exception message when the template raised one).

The C++ side is crossreg-render-chat-template (CROSSREG_RENDER_CHAT_TEMPLATE, default
build/bin); the test skips with the path it looked at when that is not built, or when this
Python has no jinja2 (Debian: python3-jinja2)."""
import datetime
import glob
import json
import os
import subprocess
import tempfile

import pytest

jinja2 = pytest.importorskip("jinja2")
from jinja2 import nodes  # noqa: E402
from jinja2.ext import Extension, loopcontrols  # noqa: E402
from jinja2.sandbox import ImmutableSandboxedEnvironment  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SHARED = os.environ.get("CROSSREG_SHARED_DIR", os.path.join(os.path.dirname(ROOT), "shared"))
TOOL = os.environ.get("CROSSREG_RENDER_CHAT_TEMPLATE", os.path.join(ROOT, "build/bin/crossreg-render-chat-template"))


class RaisedByTemplate(jinja2.exceptions.TemplateError):
    """What raise_exception raises, told apart from the template's own errors."""


class GenerationBlock(Extension):
    """Hugging Face's {% generation %} ... {% endgeneration %}: the body, unchanged."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        call = self.call_method("_render_body")
        return nodes.CallBlock(call, [], [], body).set_lineno(lineno)

    def _render_body(self, caller):
        return caller()


def make_environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[GenerationBlock, loopcontrols])

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(message):
        raise RaisedByTemplate(message)

    def strftime_now(format):
        return datetime.datetime.now().strftime(format)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def load_templates():
    templates = []
    for path in sorted(glob.glob(os.path.join(SHARED, "testdata/chat_templates/*.json"))):
        with open(path, encoding="utf-8") as f:
            config = json.load(f)
        name = os.path.splitext(os.path.basename(path))[0]
        templates.append((name, config["chat_template"], config.get("bos_token"), config.get("eos_token")))
    for path in filter(None, os.environ.get("CROSSREG_EXTRA_CHAT_TEMPLATES", "").split(":")):
        with open(path, encoding="utf-8") as f:
            templates.append((os.path.basename(path), f.read(), "<s>", "</s>"))
    gguf_path = os.environ.get("CROSSREG_SMOLLM2_GGUF")
    if gguf_path:
        templates.append(("smollm2",) + gguf_chat_template(gguf_path))
    return templates


def gguf_chat_template(path):
    """The chat template of a GGUF file and its BOS and EOS pieces (gguf-py, from build/pydeps)."""
    import gguf  # pylint: disable=import-outside-toplevel

    reader = gguf.GGUFReader(path)

    def field(name):
        f = reader.fields[name]
        return f.parts[f.data[0]]

    tokens = reader.fields["tokenizer.ggml.tokens"]
    piece = lambda i: bytes(tokens.parts[tokens.data[int(field(i)[0])]]).decode("utf-8")
    template = bytes(field("tokenizer.chat_template")).decode("utf-8")
    return template, piece("tokenizer.ggml.bos_token_id"), piece("tokenizer.ggml.eos_token_id")


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city. Température en °C, «quoted» \"too\".",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. 東京"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
                "days": {"type": "integer", "minimum": 1, "maximum": 14},
                "threshold": {"type": "number", "minimum": 0.5, "default": 1e-07, "multipleOf": 0.1},
                "verbose": {"type": "boolean", "default": False},
                "tags": {"type": "array", "items": {"type": "string"}, "nullable": None},
            },
            "required": ["city"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {"name": "search", "description": "Web search.",
                 "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}},
}
WEATHER_ARGS = {"city": "Paris", "unit": "celsius", "days": 3, "threshold": 2.5}


def tool_call(call_id, name, arguments):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


CONVERSATIONS = {
    "user_only": {"messages": [{"role": "user", "content": "Hello!"}]},
    "system_user": {"messages": [{"role": "system", "content": "You are terse."},
                                 {"role": "user", "content": "What is 2+2?"}]},
    "multi_turn": {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello! How can I help?"},
                                {"role": "user", "content": "Tell me a joke."}]},
    "multi_turn_no_prompt": {"add_generation_prompt": False,
                             "messages": [{"role": "system", "content": "Be kind."}, {"role": "user", "content": "Hi"},
                                          {"role": "assistant", "content": "Hello there."}]},
    "tools_defined": {"tools": [WEATHER_TOOL, SEARCH_TOOL],
                      "messages": [{"role": "system", "content": "Use tools when needed."},
                                   {"role": "user", "content": "Weather in Paris?"}]},
    "tool_call_string_args": {"tools": [WEATHER_TOOL], "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [tool_call("call_1", "get_weather", json.dumps(WEATHER_ARGS))]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"temperature\": 21.5, \"sky\": \"clear\"}"},
        {"role": "assistant", "content": "It is 21.5 °C and clear."}]},
    "tool_call_object_args": {"tools": [WEATHER_TOOL], "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [tool_call("call_1", "get_weather", WEATHER_ARGS)]},
        {"role": "tool", "tool_call_id": "call_1", "content": "21.5 degrees"}]},
    "parallel_tool_calls": {"tools": [WEATHER_TOOL, SEARCH_TOOL], "messages": [
        {"role": "system", "content": "Call tools in parallel."},
        {"role": "user", "content": "Weather in Paris and news about it?"},
        {"role": "assistant", "content": None, "tool_calls": [
            tool_call("a", "get_weather", json.dumps({"city": "Paris"})),
            tool_call("b", "search", json.dumps({"query": "Paris news"}))]},
        {"role": "tool", "tool_call_id": "a", "content": "sunny"},
        {"role": "tool", "tool_call_id": "b", "content": "<tool_response>no news</tool_response>"},
        {"role": "user", "content": "Thanks, summarise."}]},
    "non_ascii": {"messages": [{"role": "system", "content": "Réponds en français, s'il te plaît."},
                               {"role": "user", "content": "日本語で答えて 🙂 — naïve café, Ελληνικά, ΣΊΣΥΦΟΣ."},
                               {"role": "assistant", "content": "はい、わかりました 👍"},
                               {"role": "user", "content": "Merci ! ß İ ǅ 𝔘"}]},
    "quotes_backslashes_newlines": {"messages": [
        {"role": "user", "content": "  Say \"hi\" and 'bye' \\ C:\\path\\n\n\tindented\r\nline  \n\n"},
        {"role": "assistant", "content": "{\"json\": [1, 2.0, null]}\n```python\nprint('x')\n```"},
        {"role": "user", "content": "{{ not a template }} {% neither %}"}]},
    "empty_content": {"messages": [{"role": "system", "content": ""}, {"role": "user", "content": ""},
                                   {"role": "assistant", "content": ""}, {"role": "user", "content": " "}]},
    "reasoning_content": {"enable_thinking": True, "messages": [
        {"role": "user", "content": "What is 17*3?"},
        {"role": "assistant", "content": "51", "reasoning_content": "17*3 = 51.\n"},
        {"role": "user", "content": "And 18*3?"},
        {"role": "assistant", "content": "<think>\n18*3 is 54\n</think>\n\n54"},
        {"role": "user", "content": "Thanks"}]},
    "thinking_disabled": {"enable_thinking": False,
                          "messages": [{"role": "user", "content": "Quick answer: capital of Italy?"}]},
    "system_only": {"messages": [{"role": "system", "content": "You are a helpful assistant."}]},
    "assistant_first": {"messages": [{"role": "assistant", "content": "I start."},
                                     {"role": "user", "content": "Odd order."}]},
    "trailing_assistant_prefill": {"add_generation_prompt": False, "messages": [
        {"role": "user", "content": "Write a haiku"}, {"role": "assistant", "content": "Autumn moonlight—"}]},
}


def context_for(conversation, bos, eos):
    context = {"messages": conversation["messages"], "tools": conversation.get("tools"), "documents": None,
               "add_generation_prompt": conversation.get("add_generation_prompt", True),
               "bos_token": bos, "eos_token": eos, "date_string": "26 Jul 2024"}
    for key in ("enable_thinking",):
        if key in conversation:
            context[key] = conversation[key]
    return context


def render_python(env, source, context):
    try:
        return "ok", env.from_string(source).render(**context)
    except RaisedByTemplate as e:
        return "raised", str(e)
    except Exception as e:  # the template's own error: the C++ side must fail too
        return "error", f"{type(e).__name__}: {e}"


def render_cpp(source, context):
    with tempfile.TemporaryDirectory() as tmp:
        template_path = os.path.join(tmp, "template.jinja")
        context_path = os.path.join(tmp, "context.json")
        with open(template_path, "w", encoding="utf-8", newline="") as f:
            f.write(source)
        with open(context_path, "w", encoding="utf-8") as f:
            json.dump(context, f, ensure_ascii=False)
        return subprocess.run([TOOL, template_path, context_path], capture_output=True, timeout=60)


TEMPLATES = load_templates()
PAIRS = [(t, c) for t in TEMPLATES for c in CONVERSATIONS]
RESULTS = {}


def compare(template, conversation_name):
    name, source, bos, eos = template
    context = context_for(CONVERSATIONS[conversation_name], bos, eos)
    kind, expected = render_python(make_environment(), source, context)
    done = render_cpp(source, context)
    stderr = done.stderr.decode("utf-8", "replace")
    if kind == "ok":
        identical = done.returncode == 0 and done.stdout == expected.encode("utf-8")
        detail = "" if identical else f"jinja2: {expected!r}\nC++ (exit {done.returncode}): {done.stdout.decode('utf-8', 'replace')!r} {stderr}"
    else:
        identical = done.returncode == 2 and (kind != "raised" or expected in stderr)
        detail = f"jinja2 {kind}: {expected}; C++ exit {done.returncode}: {stderr.strip()}"
    RESULTS[(name, conversation_name)] = (identical, kind)
    return identical, detail


@pytest.fixture(scope="module", autouse=True)
def tool_built():
    if not os.access(TOOL, os.X_OK):
        pytest.skip(f"{TOOL} is not built")


def test_templates_found():
    assert len(TEMPLATES) >= 5, f"expected the chat templates of {SHARED}/testdata/chat_templates"
    if os.environ.get("CROSSREG_SMOLLM2_GGUF"):
        assert any(t[0] == "smollm2" for t in TEMPLATES)


@pytest.mark.parametrize("template,conversation", PAIRS, ids=[f"{t[0]}-{c}" for t, c in PAIRS])
def test_parity(template, conversation):
    identical, detail = compare(template, conversation)
    assert identical, detail


def test_summary(capsys):
    """Runs last (file order): one line with the count, and the pairs that failed on both sides."""
    for template, conversation in PAIRS:
        if (template[0], conversation) not in RESULTS:
            compare(template, conversation)
    same = sum(1 for identical, _ in RESULTS.values() if identical)
    both_failed = sorted(f"{t}×{c} ({kind})" for (t, c), (identical, kind) in RESULTS.items() if identical and kind != "ok")
    with capsys.disabled():
        print(f"\n[jinja parity] {same} of {len(RESULTS)} (template, conversation) pairs identical "
              f"(jinja2 {jinja2.__version__}); both failed: {', '.join(both_failed) or 'none'}")
    assert same == len(RESULTS)
