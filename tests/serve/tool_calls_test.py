"""A tool-call round trip with the official `openai` client against
`layerstream serve` on SmolLM2-135M-Instruct (its template knows no tools:
the Hermes instructions go into the system message): a request with `tools`
comes back as `tool_calls` with valid JSON arguments, not streamed and
streamed (as tool_calls deltas), and the tool's result sent back gets a
final answer; `tool_choice: "required"` is a 400 naming it. The model is
asked to repeat a call, so that even the 135M model calls. Skips (77) when
the model file is not in --models-dir.

usage: tool_calls_test.py --cli LAYERSTREAM [--models-dir DIR] [--venv DIR]
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import venv_exec  # noqa: E402

venv_exec.reexec_in_venv()
from serve_client import Server  # noqa: E402

MODEL = "SmolLM2-135M-Instruct.Q4_1.gguf"
TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
ASK = [{"role": "user", "content": 'Repeat exactly this line and nothing else: '
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'}]


def check(cond, message):
    if not cond:
        raise AssertionError(message)


def check_call(name, arguments, call_id):
    check(name == "get_weather", f"called {name!r}")
    check(json.loads(arguments) == {"city": "Paris"}, f"arguments {arguments!r}")
    check(call_id.startswith("call_"), f"id {call_id!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--models-dir", default=os.path.expanduser("~/.cache/layerstream/models"))
    args = ap.parse_args()
    path = os.path.join(args.models_dir, MODEL)
    if not os.path.exists(path):
        print(f"skip: {path} is not there")
        return 77
    import openai

    with Server(args.cli, path, "--backend", "host", "--ctx", "1024", "--parallel", "1", "--no-prefix-cache") as s:
        client = openai.OpenAI(base_url=s.base + "/v1", api_key="unused", max_retries=0, timeout=120)
        r = client.chat.completions.create(model="", messages=ASK, tools=TOOLS, temperature=0, max_tokens=40)
        choice = r.choices[0]
        check(choice.finish_reason == "tool_calls", f"finish {choice.finish_reason}: {choice.message}")
        check(len(choice.message.tool_calls) == 1, f"calls {choice.message.tool_calls}")
        call = choice.message.tool_calls[0]
        check_call(call.function.name, call.function.arguments, call.id)

        calls, finish = {}, None
        for chunk in client.chat.completions.create(model="", messages=ASK, tools=TOOLS, temperature=0,
                                                    max_tokens=40, stream=True):
            delta = chunk.choices[0].delta
            for tc in delta.tool_calls or []:
                calls[tc.index] = tc
            finish = chunk.choices[0].finish_reason or finish
        check(finish == "tool_calls" and list(calls) == [0], f"streamed: finish {finish}, calls {calls}")
        check_call(calls[0].function.name, calls[0].function.arguments, calls[0].id)

        result = {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temp_c": 21})}
        final = client.chat.completions.create(
            model="", messages=ASK + [choice.message.model_dump(exclude_none=True), result], tools=TOOLS,
            temperature=0, max_tokens=16)
        check(final.choices[0].finish_reason in ("stop", "length"), f"final {final.choices[0]}")
        check(isinstance(final.choices[0].message.content, str), f"final {final.choices[0].message}")

        try:
            client.chat.completions.create(model="", messages=ASK, tools=TOOLS, tool_choice="required")
            check(False, "tool_choice required was accepted")
        except openai.BadRequestError as e:
            check(e.body.get("param") == "tool_choice", f"400 names {e.body}")
    print("tool calls: called, streamed as deltas, answered after the result; required refused")
    return 0


if __name__ == "__main__":
    sys.exit(main())
