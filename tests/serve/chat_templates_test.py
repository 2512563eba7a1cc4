"""Our Jinja engine (runtime/chat/jinja.h, through serve_render_template)
against Python's jinja2 set up as Hugging Face's apply_chat_template sets it
up (trim_blocks, lstrip_blocks, tojson as json.dumps, raise_exception), over
the chat templates of real models and a range of conversations. Every
(template, conversation) pair must give the same text, or fail in both.

usage: chat_templates_test.py --render PATH [--models-dir DIR] [--venv DIR]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import venv_exec  # noqa: E402

venv_exec.reexec_in_venv()
import gguf_meta  # noqa: E402
import jinja2  # noqa: E402
import jinja2.ext  # noqa: E402
from jinja2.sandbox import ImmutableSandboxedEnvironment  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                           "parameters": {"type": "object",
                                                          "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}}]


def conversations():
    """(name, variables) pairs: role orders, whitespace, unicode, tools."""
    u = {"role": "user", "content": "Hello!"}
    s = {"role": "system", "content": "You are terse.\n"}
    a = {"role": "assistant", "content": "  Hi there \u2014 how can I help? \u2713 "}
    u2 = {"role": "user", "content": "What is 2+2?\n\nExplain   briefly."}
    think = {"role": "assistant", "content": "<think>hmm</think>It is 4."}
    call = {"role": "assistant", "content": "",
            "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]}
    tool = {"role": "tool", "content": "{\"temp\": 21}"}
    cases = {
        "user": [u],
        "system_user": [s, u],
        "multi_turn": [s, u, a, u2],
        "user_assistant": [u, a],
        "assistant_first": [a, u],
        "think": [u, think, u2],
        "user_user": [u, u2],
        "tool_call": [s, u2, call, tool],
    }
    for name, msgs in cases.items():
        for gen in (True, False):
            v = {"messages": msgs, "add_generation_prompt": gen, "bos_token": "<s>", "eos_token": "</s>"}
            yield f"{name}/gen={gen}", v
    yield "tools", {"messages": [s, u2], "tools": TOOLS, "add_generation_prompt": True,
                    "bos_token": "<s>", "eos_token": "</s>"}
    yield "tools_in_system", {"messages": [s, u2], "tools": TOOLS, "tools_in_user_message": False,
                              "builtin_tools": ["brave_search", "code_interpreter"],
                              "add_generation_prompt": True, "bos_token": "<s>", "eos_token": "</s>"}


def jinja2_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def templates(models_dir):
    out = {}
    # Real models' templates, and the ones built into the library (--chat-template NAME).
    builtin = os.path.join(HERE, "..", "..", "runtime", "chat", "templates")
    for prefix, folder in (("", os.path.join(HERE, "data", "chat_templates")), ("builtin:", builtin)):
        for f in sorted(os.listdir(folder)):
            if f.endswith(".jinja"):
                with open(os.path.join(folder, f), encoding="utf-8") as fh:
                    out[prefix + f[:-6]] = fh.read()
    for f in ("SmolLM2-135M-Instruct.Q4_1.gguf", "gemma-3-270m-q4_k_m.gguf"):
        path = os.path.join(models_dir, f)
        if os.path.exists(path):
            t = gguf_meta.read_string(path, "tokenizer.chat_template")
            if t:
                out["file:" + f] = t
            else:
                print(f"note: {f} has no tokenizer.chat_template")
        else:
            print(f"note: {path} not downloaded (bench/peer/fetch-models.sh); its template is not checked")
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--render", required=True)
    ap.add_argument("--models-dir", default=os.path.expanduser("~/.cache/layerstream/models"))
    args = ap.parse_args()
    env = jinja2_env()
    cases = list(conversations())
    failures, compared, errors_agreed = [], 0, 0
    tmpls = templates(args.models_dir)
    assert len(tmpls) >= 8, f"expected at least 8 templates, found {sorted(tmpls)}"
    with tempfile.TemporaryDirectory() as tmp:
        for name, source in tmpls.items():
            tpath = os.path.join(tmp, "t.jinja")
            cpath = os.path.join(tmp, "cases.json")
            with open(tpath, "w", encoding="utf-8") as fh:
                fh.write(source)
            with open(cpath, "w", encoding="utf-8") as fh:
                json.dump([v for _, v in cases], fh, ensure_ascii=False)
            r = subprocess.run([args.render, tpath, cpath], capture_output=True, text=True, timeout=60)
            if r.returncode != 0:
                failures.append(f"{name}: renderer exited {r.returncode}: {r.stderr}")
                continue
            ours = json.loads(r.stdout)
            compiled = env.from_string(source)
            for (case, variables), mine in zip(cases, ours):
                try:
                    want = compiled.render(**variables)
                except Exception as e:  # noqa: BLE001 - any jinja2 failure must be ours too
                    if mine["ok"]:
                        failures.append(f"{name} [{case}]: jinja2 failed ({e}) but we rendered {mine['text']!r}")
                    else:
                        errors_agreed += 1
                    continue
                compared += 1
                if not mine["ok"]:
                    failures.append(f"{name} [{case}]: we failed ({mine['error']}); jinja2 gave {want!r}")
                elif mine["text"] != want:
                    failures.append(f"{name} [{case}]:\n  jinja2: {want!r}\n  ours:   {mine['text']!r}")
    print(f"{len(tmpls)} templates x {len(cases)} conversations: {compared} renders compared, "
          f"{errors_agreed} errors in both, {len(failures)} mismatches")
    for f in failures:
        print("MISMATCH", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
