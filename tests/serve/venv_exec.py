"""Re-runs the calling script with the serve tests' virtual environment's
Python (made by setup_env.py) when `--venv DIR` is on its command line and it
is not running there already; ctest starts the scripts with the system
Python, before the environment exists."""
import os
import sys


def reexec_in_venv():
    if "--venv" not in sys.argv:
        return
    i = sys.argv.index("--venv")
    venv = os.path.abspath(sys.argv[i + 1])
    rest = sys.argv[:i] + sys.argv[i + 2:]
    if os.path.abspath(sys.prefix) == venv:
        sys.argv = rest
        return
    py = os.path.join(venv, "bin", "python")
    if not os.path.exists(py):
        sys.exit(f"{py} is missing: run the serve.setup test (tests/serve/setup_env.py) first")
    os.execv(py, [py, *rest[:1], "--venv", venv, *rest[1:]])
