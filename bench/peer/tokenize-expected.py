#!/usr/bin/env python3
"""Generates tests/tokenizer/data/real_model_tokens.json: the token ids that
llama.cpp's llama-tokenize gives for a fixed set of varied prompts (unicode,
digits, code, whitespace, special tokens) with each real model, so that the
tokenizer test (tests/tokenizer/real_model_tokenizer_test.cpp) can check that
layerstream's tokenizer gives the same ids without llama.cpp being present.

llama-tokenize's defaults are used, as a user would run it: BOS only where the
file's tokenizer.ggml.add_bos_token asks, special tokens in the text parsed.
The text goes through a file (-f) with --no-escape, so its bytes are exact.

Usage: bench/peer/tokenize-expected.py [--bin DIR] [--models DIR] [--out FILE]
(DIR defaults: ~/.cache/layerstream/llama.cpp/build/bin from
bench/peer/llamacpp.sh, ~/.cache/layerstream/models from bench/peer/fetch-models.sh).
Run once; the output is committed. Not part of CI.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

MODELS = {
    "smollm2": "SmolLM2-135M-Instruct.Q4_1.gguf",
    "gemma3": "gemma-3-270m-q4_k_m.gguf",
}

PROMPTS = [
    "Hello world",
    "a",
    " Hello  world, with leading, double and trailing spaces ",
    "The year 2024 has 366 days; 1,234,567.89 and 3.141592653589793238 and 0x1F or 1e-9.",
    "1234567890 12 345 6789",
    "naïve café, Grüße, Ελληνικά, русский текст, 日本語のテキスト, 한국어, العربية, हिन्दी",
    "emoji 🎉🚀👩‍👩‍👧 and symbols ©®™ ½ ∑∫√ — “quotes” ‘single’ …",
    "I'm sure they're here, can't you see? WE'LL GO, You'd better.",
    "def square(x):\n    return x ** 2  # the square\n\nfor i in range(10):\n\tprint(f\"{i}: {square(i)}\")\n",
    "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); return 0; }\n",
    "\n\n\nline one\n  line two\t\ttabs   \r\nend  \n",
    "    ",
    "URL: https://example.com/path/to?q=1&r=two#frag <b>bold</b> [link](x.md)",
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "<start_of_turn>user\nWrite a haiku about rain.<end_of_turn>\n<start_of_turn>model\n",
    "specials inline: <bos> <eos> </s> <s> <unk> <|endoftext|> <pad> end",
]


def tokenize(binary, model, text):
    with tempfile.NamedTemporaryFile("wb", suffix=".txt", delete=False) as f:
        f.write(text.encode("utf-8"))
        path = f.name
    try:
        out = subprocess.run([binary, "-m", model, "-f", path, "--ids", "--no-escape", "--log-disable"],
                             check=True, capture_output=True, text=True).stdout
    finally:
        os.unlink(path)
    line = [l for l in out.splitlines() if l.startswith("[")][-1]
    return json.loads(line)


def to_json(result):
    """Pretty JSON with one line per case (text and ids)."""
    lines = ["{", f' "generator": {json.dumps(result["generator"])},', ' "models": {']
    models = list(result["models"].items())
    for mi, (key, m) in enumerate(models):
        lines.append(f'  {json.dumps(key)}: {{"file": {json.dumps(m["file"])}, "cases": [')
        for ci, c in enumerate(m["cases"]):
            comma = "," if ci + 1 < len(m["cases"]) else ""
            lines.append("   " + json.dumps(c, ensure_ascii=False) + comma)
        lines.append("  ]}" + ("," if mi + 1 < len(models) else ""))
    lines += [" }", "}", ""]
    return "\n".join(lines)


def main():
    home = os.path.expanduser("~/.cache/layerstream")
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(home, "llama.cpp/build/bin"))
    ap.add_argument("--models", default=os.path.join(home, "models"))
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "../../tests/tokenizer/data/real_model_tokens.json"))
    a = ap.parse_args()
    binary = os.path.join(a.bin, "llama-tokenize")
    result = {"generator": "bench/peer/tokenize-expected.py (llama.cpp llama-tokenize, default flags)", "models": {}}
    for key, name in MODELS.items():
        path = os.path.join(a.models, name)
        cases = [{"text": p, "ids": tokenize(binary, path, p)} for p in PROMPTS]
        result["models"][key] = {"file": name, "cases": cases}
        print(f"{name}: {len(cases)} prompts", file=sys.stderr)
    with open(a.out, "w", encoding="utf-8") as f:
        f.write(to_json(result))
    print(os.path.normpath(a.out))


if __name__ == "__main__":
    main()
