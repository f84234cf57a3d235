"""Compile-only syntax check for uploaded and inline Python.

Reads a JSON list of {"name", "source"} on stdin and prints a JSON list with, for each file,
null or {"line", "message"}. Nothing is executed: compile() only parses.
"""
import json
import sys


def check(name, source):
    try:
        compile(source, name, "exec", dont_inherit=True)
        return None
    except SyntaxError as e:
        return {"line": e.lineno or 0, "message": e.msg or "invalid syntax"}
    except ValueError as e:  # e.g. source with NUL bytes
        return {"line": 0, "message": str(e)}


def main():
    files = json.load(sys.stdin)
    json.dump([check(f["name"], f["source"]) for f in files], sys.stdout)


if __name__ == "__main__":
    main()
