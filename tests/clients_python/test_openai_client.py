"""The official OpenAI Python client against crossreg-server on a real instruct model.

SmolLM2-135M-Instruct (Q4_1, fetched from PyPI by the smollm2_model CTest fixture) with
its own chat template: models, completions, chat (plain, and streamed with usage), a
forced tool call that parses and validates, the tool round trip (call, result, answer),
log-probabilities, response_format json_schema (validated with jsonschema), and a 400
that the client raises as openai.BadRequestError carrying the field in `param`.
"""
import json
import os
import socket
import subprocess
import tempfile
import time

import jsonschema
import openai
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("CROSSREG_BIN", os.path.join(ROOT, "build", "bin"))
GGUF = os.environ.get("CROSSREG_SMOLLM2_GGUF",
                      os.path.expanduser("~/.cache/crossreg/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"))

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"],
        },
    },
}


def free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


@pytest.fixture(scope="module")
def client():
    assert os.path.exists(GGUF), f"{GGUF} is missing: run scripts/fetch_smollm2.sh"
    grpc, http, metrics = free_ports(3)
    log = tempfile.NamedTemporaryFile(prefix="crossreg_openai_client_", suffix=".log", delete=False)
    server = subprocess.Popen(
        [os.path.join(BIN, "crossreg-server"), f"--model={GGUF}", "--host=127.0.0.1", f"--port={grpc}",
         f"--http_port={http}", f"--metrics_port={metrics}", "--kv_memory_mb=256"],
        stdout=log, stderr=subprocess.STDOUT)
    c = openai.OpenAI(base_url=f"http://127.0.0.1:{http}/v1", api_key="unused", max_retries=0, timeout=300)
    deadline = time.time() + 120
    while True:
        try:
            c.models.list()
            break
        except openai.APIConnectionError:
            assert server.poll() is None, open(log.name).read()
            assert time.time() < deadline, "the server did not come up:\n" + open(log.name).read()
            time.sleep(0.5)
    yield c
    server.terminate()
    assert server.wait(timeout=60) == 0, open(log.name).read()
    os.unlink(log.name)


def model_name(client):
    return client.models.list().data[0].id


def test_models_and_completions(client):
    models = client.models.list()
    assert len(models.data) == 1 and models.data[0].id.startswith("SmolLM2")
    done = client.completions.create(model=model_name(client), prompt="The capital of France is", max_tokens=8,
                                     temperature=0)
    assert done.choices[0].text.strip().startswith("Paris")
    assert done.usage.completion_tokens == 8


def test_chat_plain_and_streamed_with_usage(client):
    messages = [{"role": "user", "content": "What is 2+2?"}]
    whole = client.chat.completions.create(model=model_name(client), messages=messages, max_tokens=24, temperature=0)
    answer = whole.choices[0].message.content
    assert "4" in answer
    assert whole.choices[0].finish_reason in ("stop", "length")
    stream = client.chat.completions.create(model=model_name(client), messages=messages, max_tokens=24, temperature=0,
                                            stream=True, stream_options={"include_usage": True})
    text, usage = "", None
    for chunk in stream:
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
        if chunk.usage is not None:
            usage = chunk.usage
    assert text == answer
    assert usage is not None and usage.completion_tokens == whole.usage.completion_tokens


def test_forced_tool_call_round_trip(client):
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    called = client.chat.completions.create(
        model=model_name(client), messages=messages, tools=[WEATHER], temperature=0, max_tokens=64,
        tool_choice={"type": "function", "function": {"name": "get_weather"}}, parallel_tool_calls=False)
    choice = called.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.function.name == "get_weather" and call.id.startswith("call_")
    arguments = json.loads(call.function.arguments)
    jsonschema.validate(arguments, WEATHER["function"]["parameters"])
    # The call and its result go back; the model answers in words.
    messages.append(choice.message.model_dump(exclude_none=True))
    messages.append({"role": "tool", "tool_call_id": call.id,
                     "content": json.dumps({"temperature": 18, "sky": "cloudy"})})
    answer = client.chat.completions.create(model=model_name(client), messages=messages, tools=[WEATHER],
                                            temperature=0, max_tokens=48)
    assert answer.choices[0].message.content, answer


def test_required_tool_call_streams_its_arguments(client):
    stream = client.chat.completions.create(
        model=model_name(client), messages=[{"role": "user", "content": "Weather in Berlin, please."}],
        tools=[WEATHER], tool_choice="required", parallel_tool_calls=False, temperature=0, max_tokens=64, stream=True)
    name, arguments, finish = None, "", None
    for chunk in stream:
        choice = chunk.choices[0]
        finish = choice.finish_reason or finish
        for d in choice.delta.tool_calls or []:
            assert d.index == 0
            name = d.function.name or name
            arguments += d.function.arguments or ""
    assert name == "get_weather" and finish == "tool_calls"
    jsonschema.validate(json.loads(arguments), WEATHER["function"]["parameters"])


def test_logprobs(client):
    done = client.chat.completions.create(model=model_name(client), messages=[{"role": "user", "content": "Hi!"}],
                                          max_tokens=6, temperature=0, logprobs=True, top_logprobs=3)
    content = done.choices[0].logprobs.content
    assert len(content) == done.usage.completion_tokens
    for token in content:
        assert token.logprob <= 0 and len(token.top_logprobs) == 3
        # Greedy: the chosen token is the likeliest.
        assert token.logprob >= max(t.logprob for t in token.top_logprobs) - 1e-4


def test_response_format_json_schema(client):
    schema = {"type": "object",
              "properties": {"name": {"type": "string", "maxLength": 30}, "age": {"type": "integer", "minimum": 0},
                             "hobbies": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 3}},
              "required": ["name", "age", "hobbies"], "additionalProperties": False}
    done = client.chat.completions.create(
        model=model_name(client), temperature=0, max_tokens=120,
        messages=[{"role": "user", "content": "Describe a fictional person as JSON."}],
        response_format={"type": "json_schema", "json_schema": {"name": "person", "schema": schema, "strict": True}})
    assert done.choices[0].finish_reason == "stop"
    jsonschema.validate(json.loads(done.choices[0].message.content), schema)


def test_bad_request_names_the_field(client):
    with pytest.raises(openai.BadRequestError) as refused:
        client.chat.completions.create(model=model_name(client), messages=[{"role": "user", "content": "x"}],
                                       top_p=1.5)
    assert refused.value.status_code == 400
    assert refused.value.body["param"] == "top_p"
    with pytest.raises(openai.BadRequestError) as bad_tool:
        client.chat.completions.create(model=model_name(client), messages=[{"role": "user", "content": "x"}],
                                       tools=[{"type": "function", "function": {"name": "no spaces allowed"}}])
    assert bad_tool.value.body["param"] == "tools[0].function.name"
