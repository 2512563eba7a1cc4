#!/usr/bin/env python3
"""Generates tests/tokenizer/data/vocab_prompt_tokens.json: the token ids that
llama.cpp's llama-tokenize gives with the vocabulary-only files of llama.cpp
(models/ggml-vocab-NAME.gguf, fetched by bench/peer/fetch-vocabs.sh) for
varied text of our own: the prompts of tokenize-expected.py plus RTL scripts,
long whitespace runs, numbers, emoji sequences, chat markup and bytes that are
not UTF-8. The tokenizer tests (vocab_vectors_test.cpp, qwen_vocab_model_test.cpp)
check layerstream's ids against these without llama.cpp being present.

llama-tokenize's defaults are used, as a user would run it: BOS only where the
file asks, special tokens in the text parsed. The text goes through a file
(-f) with --no-escape, so its bytes are exact. A case whose text is not valid
UTF-8 is stored as "hex" instead of "text".

Usage: bench/peer/tokenize-vocab-expected.py [--bin DIR] [--vocabs DIR] [--out FILE]
(DIR defaults: ~/.cache/layerstream/llama.cpp/build/bin from bench/peer/llamacpp.sh,
~/.cache/layerstream/vocabs from bench/peer/fetch-vocabs.sh).
Run once; the output is committed. Not part of CI.
"""
import argparse
import importlib.util
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("tokenize_expected", os.path.join(HERE, "tokenize-expected.py"))
te = importlib.util.module_from_spec(spec)
spec.loader.exec_module(te)

VOCABS = ["qwen2", "qwen35", "llama-bpe", "gpt-2", "deepseek-llm", "deepseek-coder", "falcon", "mpt",
          "starcoder", "refact", "command-r", "phi-3", "llama-spm"]

EXTRA = [
    "שלום עולם! זה טקסט בעברית עם מספרים 123 ו-4.56.",
    "مرحبا بالعالم، هذا نص عربي مع أرقام ١٢٣ و 456.",
    "Mixed: English עברית العربية English.",
    "tabs\t\t\tand spaces          and newlines\n\n\n\n  \n",
    "    indented code\n        deeper\n\t\ttabbed\n",
    "3.14159265358979 -42 +7 1e10 0.000001 12,345,678 ٣٤٥ 一二三 ½",
    "👨‍👩‍👧‍👦 🏳️‍🌈 👍🏽 🇯🇵 ❤️ 🤖",
    "中文文本，包含标点符号。日本語：ひらがな、カタカナ。한국어 문장입니다.",
    "fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n    println!(\"{:?}\", v);\n}\n",
    "<|im_start|>system\nYou are Qwen.<|im_end|>\n<|im_start|>user\n你好 <|endoftext|>\n<|im_end|>",
    "Ünïcödé ǅ ß ﬁ Ωmega ΣΊΣΥΦΟΣ e\u0301 a\u0308",
    "don't DON'T I'LL we've You'RE 'tis",
]

INVALID = [
    b"abc\xff def",
    b"\xe4\xb8 truncated",
    b"\xc3\x28 bad continuation \x80\x80",
    b"ok \xf0\x9f\x98 end",
]


def tokenize_bytes(binary, model, data):
    import subprocess, tempfile
    with tempfile.NamedTemporaryFile("wb", suffix=".txt", delete=False) as f:
        f.write(data)
        path = f.name
    try:
        out = subprocess.run([binary, "-m", model, "-f", path, "--ids", "--no-escape", "--log-disable"],
                             check=True, capture_output=True, text=True, errors="replace").stdout
    finally:
        os.unlink(path)
    line = [l for l in out.splitlines() if l.startswith("[")][-1]
    return json.loads(line)


def main():
    home = os.path.expanduser("~/.cache/layerstream")
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(home, "llama.cpp/build/bin"))
    ap.add_argument("--vocabs", default=os.path.join(home, "vocabs"))
    ap.add_argument("--out", default=os.path.join(HERE, "../../tests/tokenizer/data/vocab_prompt_tokens.json"))
    a = ap.parse_args()
    binary = os.path.join(a.bin, "llama-tokenize")
    texts = [p.encode("utf-8") for p in te.PROMPTS + EXTRA] + INVALID
    lines = ["{", ' "generator": "bench/peer/tokenize-vocab-expected.py (llama.cpp llama-tokenize, default flags)",',
             ' "vocabs": {']
    for vi, name in enumerate(VOCABS):
        path = os.path.join(a.vocabs, f"ggml-vocab-{name}.gguf")
        lines.append(f'  {json.dumps(name)}: [')
        for ti, t in enumerate(texts):
            ids = tokenize_bytes(binary, path, t)
            try:
                case = {"text": t.decode("utf-8")}
            except UnicodeDecodeError:
                case = {"hex": t.hex()}
            case["ids"] = ids
            lines.append("   " + json.dumps(case, ensure_ascii=False) + ("," if ti + 1 < len(texts) else ""))
        lines.append("  ]" + ("," if vi + 1 < len(VOCABS) else ""))
        print(f"{name}: {len(texts)} prompts", file=sys.stderr)
    lines += [" }", "}", ""]
    with open(a.out, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
    print(os.path.normpath(a.out))


if __name__ == "__main__":
    main()
