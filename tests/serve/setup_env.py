"""Fixture of the serve tests: a virtual environment with the official
`openai` client and `jinja2` (from PyPI, made once per build tree), and the
small example model the server tests run on.

usage: setup_env.py --venv DIR --cli LAYERSTREAM --model OUT.gguf
"""
import argparse
import os
import subprocess
import sys
import venv


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--venv", required=True)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--model", required=True)
    args = ap.parse_args()
    py = os.path.join(args.venv, "bin", "python")
    probe = [py, "-c", "import openai, jinja2"]
    if not os.path.exists(py) or subprocess.run(probe, capture_output=True).returncode != 0:
        print(f"creating {args.venv} with openai and jinja2 from PyPI")
        venv.create(args.venv, with_pip=True, clear=True)
        r = subprocess.run([py, "-m", "pip", "install", "-q", "openai>=1.0", "jinja2>=3.1"])
        if r.returncode != 0:
            print("pip install openai jinja2 failed: the serve tests need PyPI (or a pip mirror)", file=sys.stderr)
            return 1
    if not os.path.exists(args.model):
        # A small model: fast passes even in sanitizer builds.
        r = subprocess.run([args.cli, "example-model", args.model + ".tmp", "--size", "8MiB", "--dtype", "q8_0"])
        if r.returncode != 0:
            return 1
        os.replace(args.model + ".tmp", args.model)
    return 0


if __name__ == "__main__":
    sys.exit(main())
