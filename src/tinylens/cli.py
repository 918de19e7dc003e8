"""The ``tinylens`` command: one front door to what works on the workflow's results.

    tinylens explain PROMPT              any prompt, from a finished run (docs/explain.md)
    tinylens restore --preset small      after `dvc pull workflow@small`: check, align Snakemake (docs/dvc.md)
    tinylens publish --preset small      record a finished run in dvc.lock, push, commit (docs/dvc.md)
    tinylens export MODEL_DIR OUT_DIR    a model as a folder TransformerLens loads (docs/transformerlens.md)
    tinylens findings show|snapshot|render   the run's findings in words; README.md's block

The workflow itself runs with ``snakemake`` (docs/running.md). ``python -m tinylens VERB`` is the same
command where the console script is not on the PATH.

Every verb's arguments are defined here, and only here: ``tinylens --help``, ``tinylens VERB --help``
and a bad argument are answered without importing the module that does the work (``explain`` and
``export`` import torch: 2-3 CPU-seconds). Once the arguments are good, ``tinylens.<verb>.run(args)``
does it and returns the exit status.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from tinylens import __version__

#: Where the trained model folders are, for the messages (the default preset's original seed).
MODEL_EXAMPLE = "results/small/models/seed1337"


def _explain(p: argparse.ArgumentParser) -> None:
    p.add_argument("prompt", help="substring_length characters of the corpus' vocabulary (a longer text: its "
                                  "last characters)")
    p.add_argument("--preset", default="small", help="the finished run's preset (default: small)")
    p.add_argument("--workdir", type=Path, default=Path("."),
                   help="the folder holding results/ (default: the current folder)")
    p.add_argument("--config", type=Path, default=None,
                   help="the config the run used (default: WORKDIR/config/config.yaml, else the repository's)")
    p.add_argument("--out", type=Path, default=None,
                   help="where to write the JSON and PNG (default: results/<preset>/explain)")
    p.add_argument("--top", type=int, default=8, help="tokens shown per distribution (default: 8)")


def _preset_and_config(p: argparse.ArgumentParser) -> None:
    from tinylens.restore import SAFE_CONFIG_KEYS

    p.add_argument("--preset", default="small", help="the preset whose artifacts are meant (default: small)")
    p.add_argument("--config", nargs="*", default=[], metavar="KEY=VALUE",
                   help=f"Snakemake --config values; only {', '.join(SAFE_CONFIG_KEYS)} "
                        "(e.g. corpus_url=/path/to/input.txt)")


def _publish(p: argparse.ArgumentParser) -> None:
    _preset_and_config(p)
    p.add_argument("--no-push", action="store_true", help="commit dvc.lock but do not push the artifacts")
    p.add_argument("--message", help="git commit message (default: 'Artifacts of the <preset> preset')")


def model_folder(text: str) -> Path:
    """An ``export`` argument: a trained model's folder (it has config.json), checked before torch is imported."""
    from tinylens.model_config import CONFIG_FILE

    path = Path(text)
    if not (path / CONFIG_FILE).is_file():
        raise argparse.ArgumentTypeError(f"{path} has no {CONFIG_FILE}: pass a trained model folder such as "
                                         f"{MODEL_EXAMPLE}")
    return path


def _export(p: argparse.ArgumentParser) -> None:
    p.add_argument("model_dir", type=model_folder, help=f"a trained model's folder, e.g. {MODEL_EXAMPLE} "
                                                        "(model.safetensors, config.json, tokenizer.json)")
    p.add_argument("out_dir", type=Path, help="the folder to write (created if missing)")
    p.add_argument("--tolerance", type=float, default=1e-4,
                   help="the largest accepted max abs logit difference from tinylens (default: 1e-4)")


def _findings(p: argparse.ArgumentParser) -> None:
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    show = actions.add_parser("show", help="print a run's findings (what its findings.md holds)",
                              description="Print a run's findings in words, from its metrics files.")
    show.add_argument("run", type=Path, help="the run's folder, e.g. results/small")
    snap = actions.add_parser(
        "snapshot", help="copy a finished run's metrics into docs/snapshot/ and re-render README.md's block",
        description="Copy a finished run's metrics files into docs/snapshot/ with the commit, date, machine and "
                    "preset, and re-render README.md's block from them; commit docs/snapshot/ and README.md "
                    "together.")
    snap.add_argument("run", type=Path, help="the run's folder, e.g. results/small")
    render = actions.add_parser(
        "render", help="re-render README.md's block from the committed snapshot (--check: only compare)",
        description="Re-render README.md's generated block from the committed snapshot (docs/snapshot/), after a "
                    "change to a family's sentences.")
    render.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 if README.md's block is not what the snapshot renders")
    for action in (snap, render):
        action.add_argument("--repo", type=Path, default=Path.cwd(), help="the repository root (default: here)")


#: verb -> (its line in `tinylens --help`, the description of `tinylens VERB --help`, its arguments).
#: ``tinylens.<verb>.run(args)`` does the work.
VERBS: dict[str, tuple[str, str, Callable[[argparse.ArgumentParser], None]]] = {
    "explain": (
        "explain a prompt from a finished run (docs/explain.md)",
        "Explain a prompt from a finished run: per block the matching strings and the approximation from them "
        "against the model's next-token distribution (method.md §6). Prints it and writes a JSON and a PNG; "
        "exit status 2 for a prompt the run cannot explain, 1 for a run that is not there.",
        _explain),
    "restore": (
        "check pulled artifacts, align Snakemake with them (docs/dvc.md)",
        "After `dvc pull workflow@PRESET`: check that dvc.lock records the preset, that `dvc status` is clean and "
        "that Snakemake's plan shows every output present; only then `snakemake --touch`, after which the plan "
        "must hold no job. Changes nothing unless every check passes (docs/dvc.md).",
        _preset_and_config),
    "publish": (
        "record a finished run in dvc.lock, push it, commit (docs/dvc.md)",
        "After a finished run: Snakemake's plan must show every output present and up to date; then "
        "`dvc commit` and `dvc push` of the preset's stage, and a git commit of dvc.lock and the run's headline "
        "(results/headline/PRESET.json, what `dvc metrics show` prints; docs/dvc.md).",
        _publish),
    "export": (
        "write a model TransformerLens loads (docs/transformerlens.md)",
        "Export a trained model (a results/<preset>/models/seed<N> folder) to a folder TransformerLens 4 loads "
        "without tinylens, and check that its logits agree with ours. Needs the tl extra "
        '(pip install -e ".[tl]").',
        _export),
    "findings": (
        "a run's findings in words; README.md's block from docs/snapshot/",
        "The run's findings in words (tinylens.findings): every family's sentences, formatted from a run's "
        "metrics. README.md shows those of the committed snapshot (docs/snapshot/).",
        _findings),
}


def parser() -> argparse.ArgumentParser:
    """``tinylens`` and one sub-parser per verb of :data:`VERBS` (building them imports nothing heavy)."""
    top = argparse.ArgumentParser(
        prog="tinylens", description="tinylens's commands, on the results of its workflow (which runs with "
                                     "snakemake: docs/running.md).",
        epilog="`tinylens VERB --help` gives a verb's arguments. `python -m tinylens` is the same command.")
    top.add_argument("--version", action="version", version=f"tinylens {__version__}")
    verbs = top.add_subparsers(dest="verb", metavar="VERB", title="verbs", required=True)
    for name, (summary, description, arguments) in VERBS.items():
        arguments(verbs.add_parser(name, help=summary, description=description))
    return top


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv`` (default: the command line), then run the verb; returns its exit status. A usage
    error (an unknown verb, a missing or bad argument) exits with status 2 before any verb's module is read."""
    argv = list(sys.argv[1:] if argv is None else argv)
    top = parser()
    if not argv:
        top.print_help(sys.stderr)
        return 2
    args = top.parse_args(argv)
    return importlib.import_module(f"tinylens.{args.verb}").run(args)
