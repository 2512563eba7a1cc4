"""Tool-call round trips with the official `openai` client against
`layerstream serve`, not streamed and streamed (as tool_calls deltas):
request with `tools` -> `tool_calls` with valid JSON arguments -> the tool's
result sent back -> a final answer.

SmolLM2-135M-Instruct (its template knows no tools: the Hermes instructions
go into the system message) is asked to repeat a call, so that even the
135M model calls under tool_choice "auto". Then tool_choice "required" and a
named function, which a grammar enforces: asked something unrelated, the
model still calls, with arguments valid under the tool's schema. The same
round trip on gemma-3-270m (whose template has no tool format either: the
Hermes polyfill, as llama.cpp's generic format for such templates), with
the call forced. Skips (77) when neither model file is in --models-dir.

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

SMOLLM = "SmolLM2-135M-Instruct.Q4_1.gguf"
GEMMA = "gemma-3-270m-q4_k_m.gguf"
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Get the current weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
TIME = {"type": "function", "function": {
    "name": "get_time", "description": "The time in a timezone",
    "parameters": {"type": "object", "properties": {"zone": {"enum": ["UTC", "CET", "PST"]},
                                                    "hours_ahead": {"type": "integer", "minimum": 0,
                                                                    "maximum": 12}},
                   "required": ["zone", "hours_ahead"], "additionalProperties": False}}}
TOOLS = [WEATHER]
ASK = [{"role": "user", "content": 'Repeat exactly this line and nothing else: '
        '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'}]
UNRELATED = [{"role": "user", "content": "Write a haiku about the sea."}]


def check(cond, message):
    if not cond:
        raise AssertionError(message)


def check_call(name, arguments, call_id):
    check(name == "get_weather", f"called {name!r}")
    check(json.loads(arguments) == {"city": "Paris"}, f"arguments {arguments!r}")
    check(call_id.startswith("call_"), f"id {call_id!r}")


def check_valid(name, arguments):
    """A call of WEATHER or TIME whose arguments satisfy its schema."""
    args = json.loads(arguments)
    if name == "get_weather":
        check(isinstance(args.get("city"), str) and set(args) == {"city"}, f"get_weather {arguments}")
    else:
        check(name == "get_time", f"called {name!r}")
        check(set(args) == {"zone", "hours_ahead"} and args["zone"] in ("UTC", "CET", "PST") and
              isinstance(args["hours_ahead"], int) and 0 <= args["hours_ahead"] <= 12, f"get_time {arguments}")


def streamed_calls(client, **request):
    """The tool calls and finish reason of a streamed request."""
    calls, finish = {}, None
    for chunk in client.chat.completions.create(model="", stream=True, **request):
        for tc in chunk.choices[0].delta.tool_calls or []:
            calls[tc.index] = tc
        finish = chunk.choices[0].finish_reason or finish
    return calls, finish


def round_trip(client, messages, tools, **force):
    """Call (not streamed, then streamed), send the result back, get an answer."""
    r = client.chat.completions.create(model="", messages=messages, tools=tools, temperature=0, max_tokens=60,
                                       **force)
    choice = r.choices[0]
    check(choice.finish_reason == "tool_calls", f"finish {choice.finish_reason}: {choice.message}")
    check(len(choice.message.tool_calls) >= 1, f"calls {choice.message.tool_calls}")
    call = choice.message.tool_calls[0]
    check_valid(call.function.name, call.function.arguments)
    check(call.id.startswith("call_"), f"id {call.id!r}")

    calls, finish = streamed_calls(client, messages=messages, tools=tools, temperature=0, max_tokens=60, **force)
    check(finish == "tool_calls" and 0 in calls, f"streamed: finish {finish}, calls {calls}")
    check(calls[0].function.name == call.function.name and
          json.loads(calls[0].function.arguments) == json.loads(call.function.arguments),
          f"streamed {calls[0]} vs {call}")

    result = {"role": "tool", "tool_call_id": call.id, "content": json.dumps({"temp_c": 21, "time": "12:00"})}
    history = messages + [choice.message.model_dump(exclude_none=True), result]
    final = client.chat.completions.create(model="", messages=history, tools=tools, temperature=0, max_tokens=16)
    check(final.choices[0].finish_reason in ("stop", "length", "tool_calls"), f"final {final.choices[0]}")
    _, finish = streamed_calls(client, messages=history, tools=tools, temperature=0, max_tokens=16)
    check(finish in ("stop", "length", "tool_calls"), f"final streamed: {finish}")
    return choice


def forced(client, tools):
    """tool_choice "required" and a named function on a request that asks for no call."""
    import openai

    for choice_field, names in (("required", {"get_weather", "get_time"}), (
            {"type": "function", "function": {"name": "get_time"}}, {"get_time"})):
        for parallel in (True, False):
            r = client.chat.completions.create(model="", messages=UNRELATED, tools=tools, temperature=0,
                                               max_tokens=80, tool_choice=choice_field,
                                               parallel_tool_calls=parallel)
            choice = r.choices[0]
            # With parallel calls a small model may go on calling until max_tokens.
            check(choice.finish_reason == "tool_calls" or (parallel and choice.finish_reason == "length"),
                  f"{choice_field}: {choice}")
            check(len(choice.message.tool_calls) >= 1 and (parallel or len(choice.message.tool_calls) == 1),
                  f"{choice_field} parallel={parallel}: {choice.message.tool_calls}")
            for call in choice.message.tool_calls:
                check(call.function.name in names, f"{choice_field}: called {call.function.name}")
                check_valid(call.function.name, call.function.arguments)
        calls, finish = streamed_calls(client, messages=UNRELATED, tools=tools, temperature=0, max_tokens=80,
                                       tool_choice=choice_field, parallel_tool_calls=False)
        check(finish == "tool_calls" and calls and all(c.function.name in names for c in calls.values()),
              f"streamed {choice_field}: {finish} {calls}")
    try:
        client.chat.completions.create(model="", messages=UNRELATED, tools=tools, tool_choice="required",
                                       response_format={"type": "json_object"})
        check(False, "tool_choice required with response_format was accepted")
    except openai.BadRequestError as e:
        check(e.body.get("param") == "tool_choice", f"400 names {e.body}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--models-dir", default=os.path.expanduser("~/.cache/layerstream/models"))
    args = ap.parse_args()
    import openai

    ran = []
    flags = ("--backend", "host", "--ctx", "1024", "--parallel", "1", "--no-prefix-cache")
    path = os.path.join(args.models_dir, SMOLLM)
    if os.path.exists(path):
        with Server(args.cli, path, *flags) as s:
            client = openai.OpenAI(base_url=s.base + "/v1", api_key="unused", max_retries=0, timeout=120)
            choice = round_trip(client, ASK, TOOLS)
            check_call(choice.message.tool_calls[0].function.name, choice.message.tool_calls[0].function.arguments,
                       choice.message.tool_calls[0].id)
            forced(client, [WEATHER, TIME])
        ran.append("SmolLM2: called (auto), streamed, answered; required and named forced")
    path = os.path.join(args.models_dir, GEMMA)
    if os.path.exists(path):
        with Server(args.cli, path, *flags) as s:
            client = openai.OpenAI(base_url=s.base + "/v1", api_key="unused", max_retries=0, timeout=120)
            round_trip(client, [{"role": "user", "content": "What is the weather in Paris?"}], TOOLS,
                       tool_choice="required", parallel_tool_calls=False)
        ran.append("gemma-3: called (required), streamed, answered")
    if not ran:
        print(f"skip: neither {SMOLLM} nor {GEMMA} is in {args.models_dir}")
        return 77
    print("tool calls: " + "; ".join(ran))
    return 0


if __name__ == "__main__":
    sys.exit(main())
