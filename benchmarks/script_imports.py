"""The start-up cost of workflow scripts: the CPU seconds of importing what each script imports,
for two versions of the library side by side (old and new interleaved, best of --repeats each).

    git worktree add /tmp/old <commit>
    python benchmarks/script_imports.py /tmp/old/src src hellinger_summary plot_threshold_sweep ...

A job's own work comes after these imports; for the figure and summary jobs of a `test` or `small`
run the imports are most of the job (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import ast
import resource
import subprocess
import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def imports_of(script: Path) -> str:
    """The script's top-level import statements, as code (``__future__`` left out)."""
    tree = ast.parse(script.read_text(encoding="utf-8"))
    return "\n".join(ast.unparse(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
                     and getattr(n, "module", None) != "__future__")


def import_cpu(code: str, src: str) -> float:
    """CPU seconds (user + system) of a fresh Python running ``code`` with ``src`` first on its path."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": src, "PATH": "/usr/bin:/bin"}, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old_src")
    parser.add_argument("new_src")
    parser.add_argument("scripts", nargs="+", help="scripts under scripts/, as <family>/<rule>, without .py")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    total_old = total_new = 0.0
    print("| script | old CPU-s | new CPU-s |\n|---|---|---|")
    for name in args.scripts:
        code = imports_of(SCRIPTS / f"{name}.py")
        old = min(import_cpu(code, args.old_src) for _ in range(args.repeats))
        new = min(import_cpu(code, args.new_src) for _ in range(args.repeats))
        total_old, total_new = total_old + old, total_new + new
        print(f"| {name} | {old:.2f} | {new:.2f} |")
    print(f"| all {len(args.scripts)} | {total_old:.1f} | {total_new:.1f} (x{total_new / total_old:.2f}) |")


if __name__ == "__main__":
    main()
