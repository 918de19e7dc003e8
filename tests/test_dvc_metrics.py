"""`dvc metrics show` and `dvc metrics diff` print each run's headline (results/headline/<preset>.json), in a
terminal's width, with no warning for the presets not run: in a tiny git + DVC repository holding this checkout's
dvc.yaml, .gitignore, .dvcignore and results/headline/README.md, with metrics files made from the committed
snapshot (no workflow run needed)."""

import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from tinylens import published
from tinylens.comparison import HEADLINE, run_headline
from tinylens.core.summary import headline as core_headline

#: The widest a line of `dvc metrics show` or `dvc metrics diff` may be (a terminal, a CI log).
COLUMNS = 120
#: What a reader finds in the table: the approximation's mean Hellinger distances, the seeds' noise floor,
#: the original model's validation loss, the comparison's verdict counts.
KEYS = ["H.heldout", "H.paper", "H.published", "H.seeds", "consistent", "differs", "val_loss"]
GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}


def sh(*cmd, cwd):
    proc = subprocess.run([str(c) for c in cmd], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **GIT_ENV, "COLUMNS": "200"})
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


def metrics(*args, cwd) -> list[str]:
    """The lines `dvc metrics ARGS` prints, checked for DVC's warning and for their width."""
    proc = sh(sys.executable, "-m", "dvc", "metrics", *args, cwd=cwd)
    assert "failed to load" not in proc.stderr + proc.stdout, proc.stderr
    lines = proc.stdout.splitlines()
    wide = [line for line in lines if len(line) > COLUMNS]
    assert not wide, f"`dvc metrics {' '.join(args)}` is wider than {COLUMNS} columns:\n" + "\n".join(wide)
    return lines


def snapshot_run(repo, preset: str, root, shift: float = 0.0) -> dict:
    """A finished run's metrics files as the workflow writes them (from docs/snapshot/), every distance and
    loss moved by ``shift``: the full files under results/<preset>/metrics/ and the headline."""
    snap = repo / "docs/snapshot/metrics"
    hellinger, training = (json.loads((snap / f"{name}.json").read_text()) for name in ("hellinger", "training"))
    comparison = json.loads((snap / "paper_comparison.json").read_text())
    core = {k: v + shift if isinstance(v, float) else v for k, v in core_headline(hellinger["modes"], training).items()}
    comparison["counts"]["consistent"] += round(100 * shift)
    (root / f"results/{preset}/metrics").mkdir(parents=True, exist_ok=True)
    (root / f"results/{preset}/metrics/headline.json").write_text(json.dumps(core, indent=1))
    (root / f"results/{preset}/metrics/paper_comparison.json").write_text(json.dumps(comparison, indent=1))
    made = run_headline(core, comparison)
    (root / HEADLINE.format(preset=preset)).write_text(json.dumps(made, indent=1) + "\n")
    return made


@pytest.fixture
def dvc_repo(repo, tmp_path):
    root = tmp_path / "repo"
    for name in ("dvc.yaml", ".gitignore", ".dvcignore", "results/headline/README.md"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(repo / name, root / name)
    sh("git", "init", "-q", "-b", "main", cwd=root)
    sh(sys.executable, "-m", "dvc", "init", "-q", cwd=root)
    sh("git", "add", "-A", cwd=root)
    sh("git", "commit", "-qm", "project", cwd=root)
    return root


def test_metrics_show_prints_each_run_headline_narrow_and_without_warnings(repo, config, dvc_repo):
    assert metrics("show", cwd=dvc_repo) == []  # nothing run yet: nothing to show, nothing to warn about
    made = snapshot_run(repo, "small", dvc_repo)
    lines = metrics("show", cwd=dvc_repo)
    assert lines[0].split() == ["Path", *KEYS]
    assert lines[1].split() == ["results/headline/small.json", *(str(made[k] if "." not in k else made["H"][k[2:]])
                                                                 for k in KEYS)]
    for preset in config["presets"]:  # every preset run: one row each, the longest name included
        snapshot_run(repo, preset, dvc_repo)
    lines = metrics("show", cwd=dvc_repo)
    shown = sorted(line.split()[0] for line in lines[1:])
    assert shown == sorted(HEADLINE.format(preset=preset) for preset in config["presets"])


def test_metrics_diff_compares_a_new_run_with_the_committed_headline(repo, dvc_repo):
    committed = snapshot_run(repo, "small", dvc_repo)
    sh("git", "add", "results/headline/small.json", cwd=dvc_repo)  # as `tinylens publish` does, with dvc.lock
    sh("git", "commit", "-qm", "Artifacts of the small preset", cwd=dvc_repo)
    assert metrics("diff", cwd=dvc_repo) == []
    new = snapshot_run(repo, "small", dvc_repo, shift=0.01)
    rows = {tuple(line.split()[:2]): line.split()[2:] for line in metrics("diff", cwd=dvc_repo)[1:]}
    old_h, new_h = committed["H"]["heldout"], new["H"]["heldout"]  # the snapshot's, rounded to 4 digits
    assert new_h == pytest.approx(old_h + 0.01, abs=1e-4)
    assert rows[("results/headline/small.json", "H.heldout")] == [str(old_h), str(new_h), "0.01"]
    assert rows[("results/headline/small.json", "consistent")] == [str(committed["consistent"]),
                                                                     str(committed["consistent"] + 1), "1"]
    assert {metric for _, metric in rows} == {"H.heldout", "H.paper", "H.seeds", "consistent", "val_loss"}


def test_the_headline_is_a_stage_output_git_carries_and_the_folder_dvc_reads(repo):
    """dvc.yaml: the preset's headline is an output of its stage that DVC does not cache (so git carries it and
    `tinylens publish` commits it), in the one folder the top-level `metrics:` names; no stage declares
    `metrics:` (DVC would warn for each preset not run)."""
    from tinylens.restore import git_outputs

    dvc_yaml = yaml.safe_load((repo / "dvc.yaml").read_text(encoding="utf-8"))
    folder = HEADLINE.format(preset="x").rsplit("/", 1)[0]
    assert dvc_yaml["metrics"] == [folder]
    assert all("metrics" not in stage.get("do", stage) for stage in dvc_yaml["stages"].values())
    for preset in dvc_yaml["stages"]["workflow"]["foreach"]:
        assert git_outputs(preset, repo) == [HEADLINE.format(preset=preset)]


def test_the_headline_picks_the_numbers_a_reader_wants():
    core = {"heldout_approximation_mean": 0.174136, "paper_paper_values_mean": 0.237558,
            "heldout_alternates_mean": 0.151411, "paper_alternates_mean": 0.148948, "val_loss_original": 1.814283,
            "corpus_approximation_mean": 0.1648}
    comparison = {"counts": {"rows": 65, "consistent": 2, "differs": 4, "not comparable": 55}}
    assert run_headline(core, comparison) == {
        "H": {"heldout": 0.1741, "paper": 0.2376, "published": published.HELLINGER["mean"],
              "seeds": 0.1514},
        "val_loss": 1.8143, "consistent": 2, "differs": 4}
    # a preset whose paper mode has no paper values: the key is left out (`dvc metrics show` prints "-")
    del core["paper_paper_values_mean"]
    assert "paper" not in run_headline(core, comparison)["H"]
