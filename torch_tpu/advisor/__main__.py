"""python -m torch_tpu.advisor [--json] [-o FILE] script.py [args...]: runs the script under the
advisor, as python -m cProfile does, and writes the report when it ends."""
import argparse
import os
import runpy
import sys
import traceback

from . import watch


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m torch_tpu.advisor",
        description="Run a script on the tpu device and report what to change for it to run well.")
    parser.add_argument("--json", action="store_true", help="write the report as JSON")
    parser.add_argument("-o", "--output", help="write the report to this file instead of stdout")
    parser.add_argument("script", help="the Python script to run")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    options = parser.parse_args(argv)

    script = os.path.abspath(options.script)
    sys.argv = [options.script] + options.args
    sys.path.insert(0, os.path.dirname(script))
    status = 0
    with watch() as report:
        try:
            runpy.run_path(script, run_name="__main__")
        except SystemExit as stop:
            status = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
        except BaseException:  # the report of a failing run still says what happened until then
            traceback.print_exc()
            status = 1
    text = report.to_json() + "\n" if options.json else report.to_text()
    if options.output:
        with open(options.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    return status


if __name__ == "__main__":
    sys.exit(main())
