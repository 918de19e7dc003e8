"""The suite itself: it tests this checkout's package, and without the corpus copy the tests that need it skip cleanly."""

import os
import subprocess
import sys
from pathlib import Path


def test_tests_needing_the_corpus_skip_when_it_is_absent(repo, tmp_path):
    env = {**os.environ, "TINYLENS_CORPUS": str(tmp_path / "absent/input.txt")}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs",
         "tests/test_corpus.py::test_split_is_first_ninety_percent",
         "tests/test_strings.py::test_full_corpus_strings_are_sorted", "tests/test_corpus.py::test_tokenizer_is_sorted_characters_and_round_trips"],
        cwd=repo, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "1 passed, 2 skipped" in proc.stdout
    assert "set TINYLENS_CORPUS" in proc.stdout


def test_the_suite_tests_this_checkouts_package(repo):
    """Not a copy installed from another checkout: in this process and in the processes the tests start."""
    import tinylens

    src = repo / "src"
    assert Path(tinylens.__file__).resolve().is_relative_to(src), tinylens.__file__
    proc = subprocess.run([sys.executable, "-c", "import tinylens; print(tinylens.__file__)"], capture_output=True,
                          text=True, cwd="/")
    assert Path(proc.stdout.strip()).resolve().is_relative_to(src), proc.stdout + proc.stderr
