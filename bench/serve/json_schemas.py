"""Structured output against `layerstream serve` with the official `openai`
client: 50 varied JSON schemas (nested objects, arrays with minItems /
maxItems, enums, bounded numbers, required and optional properties, strings
with patterns, formats and lengths, anyOf, nullable types, $defs / $ref),
each sent as response_format json_schema (strict); every reply must parse
and validate against its schema (jsonschema, with format checks). Prints one
line per schema and the share that validated; exits 1 below 100%.

The schemas come from a seeded generator, so a run is repeatable. Needs a
Python with `openai` and `jsonschema` (pip install openai jsonschema).

usage: json_schemas.py --cli build/ci/bin/layerstream --model FILE.gguf
                       [--count 50] [--seed 1] [--temperature 0] [serve flags after --]
"""
import argparse
import json
import os
import random
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "serve"))
from serve_client import Server  # noqa: E402

WORDS = ["name", "city", "age", "score", "tags", "kind", "price", "count", "active", "email", "id", "when",
         "owner", "items", "size", "level", "code", "note", "rating", "ratio"]
# Formats xgrammar constrains (and jsonschema's FormatChecker checks without extra packages).
FORMATS = ["date", "email", "uuid", "ipv4", "date-time", "time"]
PATTERNS = [r"^[A-Z]{3}$", r"^[a-z]+-[0-9]{2}$", r"^\+?[0-9]{3,6}$", r"^(yes|no|maybe)$"]


def leaf(rng):
    """A scalar schema of one of the kinds the set has to cover."""
    kind = rng.choice(["string", "short", "pattern", "format", "enum", "int", "number", "bool", "nullable",
                       "const", "anyof"])
    if kind == "string":
        return {"type": "string", "maxLength": rng.randint(4, 16)}
    if kind == "short":
        lo = rng.randint(1, 3)
        return {"type": "string", "minLength": lo, "maxLength": lo + rng.randint(0, 6)}
    if kind == "pattern":
        return {"type": "string", "pattern": rng.choice(PATTERNS)}
    if kind == "format":
        return {"type": "string", "format": rng.choice(FORMATS)}
    if kind == "enum":
        return {"enum": rng.sample(["red", "green", "blue", "small", "large", "on", "off"], rng.randint(2, 4))}
    if kind == "int":
        lo = rng.randint(-50, 50)
        return {"type": "integer", "minimum": lo, "maximum": lo + rng.randint(0, 100)}
    if kind == "number":
        lo = rng.choice([0, -1, 0.5, 10])
        return {"type": "number", "minimum": lo, "maximum": lo + rng.choice([1, 5, 100])}
    if kind == "bool":
        return {"type": "boolean"}
    if kind == "nullable":
        return {"type": ["integer", "null"], "minimum": 0, "maximum": 9}
    if kind == "const":
        return {"const": rng.choice(["v1", "fixed", "ok"])}
    return {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 99}, {"type": "string", "maxLength": 6}]}


def value(rng, depth):
    """A property's schema: a leaf, an array of something, or (shallow enough) an object."""
    roll = rng.random()
    if depth < 2 and roll < 0.2:
        return obj(rng, depth + 1)
    if roll < 0.4:
        lo = rng.randint(0, 2)
        return {"type": "array", "items": leaf(rng) if depth >= 1 or rng.random() < 0.7 else obj(rng, depth + 1),
                "minItems": lo, "maxItems": lo + rng.randint(0, 2)}
    return leaf(rng)


def obj(rng, depth=0):
    keys = rng.sample(WORDS, rng.randint(1, 4 if depth == 0 else 3))
    props = {k: value(rng, depth) for k in keys}
    required = [k for k in keys if rng.random() < 0.7] or keys[:1]
    return {"type": "object", "properties": props, "required": required, "additionalProperties": False}


def schemas(count, seed):
    rng = random.Random(seed)
    out = []
    # One with $defs / $ref, then the generated ones.
    out.append({"$defs": {"point": {"type": "object", "properties": {"x": {"type": "integer", "minimum": 0,
                                                                           "maximum": 9},
                                                                     "y": {"type": "integer", "minimum": 0,
                                                                           "maximum": 9}},
                                    "required": ["x", "y"], "additionalProperties": False}},
                "type": "object", "properties": {"start": {"$ref": "#/$defs/point"},
                                                 "end": {"$ref": "#/$defs/point"}},
                "required": ["start", "end"], "additionalProperties": False})
    while len(out) < count:
        out.append(obj(rng))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cli", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--count", type=int, default=50)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--max-tokens", type=int, default=400)
    ap.add_argument("serve_args", nargs="*", help="more `layerstream serve` flags (after --)")
    args = ap.parse_args()
    import jsonschema
    import openai

    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    valid, started = 0, time.time()
    serve_args = args.serve_args or ["--backend", "host", "--ctx", "2048", "--parallel", "1"]
    with Server(args.cli, args.model, *serve_args) as s:
        client = openai.OpenAI(base_url=s.base + "/v1", api_key="unused", max_retries=0, timeout=600)
        for i, schema in enumerate(schemas(args.count, args.seed)):
            r = client.chat.completions.create(
                model="", temperature=args.temperature, max_tokens=args.max_tokens, seed=args.seed + i,
                messages=[{"role": "user", "content": "Write one example JSON object for this schema: " +
                           json.dumps(schema)}],
                response_format={"type": "json_schema",
                                 "json_schema": {"name": f"s{i}", "schema": schema, "strict": True}})
            text, finish = r.choices[0].message.content, r.choices[0].finish_reason
            try:
                jsonschema.validate(json.loads(text), schema, format_checker=checker)
                ok, why = True, ""
            except (ValueError, jsonschema.ValidationError) as e:
                ok, why = False, str(e).splitlines()[0]
            valid += ok
            print(f"{i:2d} {'ok ' if ok else 'BAD'} finish={finish} tokens={r.usage.completion_tokens} "
                  f"{text if len(text) < 160 else text[:157] + '...'} {why}", flush=True)
    n = args.count
    print(f"valid: {valid}/{n} ({100.0 * valid / n:.0f}%) in {time.time() - started:.0f} s "
          f"on {os.path.basename(args.model)}")
    return 0 if valid == n else 1


if __name__ == "__main__":
    sys.exit(main())
