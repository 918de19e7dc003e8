"""Workflow configuration: JSON Schema validation with errors that name the key, and preset resolution.

The Snakefile calls :func:`validate_config` once, before any job is planned;
rules then pass plain values from the resolved preset into the library. No
library function reads the configuration itself.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from tinylens.model import ModelConfig
from tinylens.train import Phase, TrainConfig


class ConfigError(ValueError):
    """The configuration does not match the schema; the message lists every problem by key."""


def _key(path) -> str:
    return ".".join(str(p) for p in path) or "<top level>"


def _describe(error: jsonschema.ValidationError) -> list[str]:
    where = _key(error.absolute_path)
    if error.validator == "additionalProperties" and isinstance(error.instance, dict):
        allowed = sorted(error.schema.get("properties", {}))
        extra = [k for k in error.instance if k not in allowed]
        out = []
        for key in extra:
            full = _key([*error.absolute_path, key])
            close = difflib.get_close_matches(str(key), allowed, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            out.append(f"unknown config key '{full}'{hint}; allowed here: {', '.join(allowed)}")
        return out
    if error.validator == "required":
        return [f"config key '{where}' is missing: {error.message}"]
    if error.validator == "type":
        expected = error.validator_value
        expected = " or ".join(expected) if isinstance(expected, list) else expected
        return [
            f"config key '{where}' must be of type {expected}, "
            f"got {error.instance!r} ({type(error.instance).__name__})"
        ]
    return [f"config key '{where}': {error.message}"]


def grid_edges(grid: Mapping[str, Any]) -> list[float]:
    """The threshold grid's edges ``start, start + step, ...`` (as :func:`tinylens.search.threshold_edges`)."""
    return [round(grid["start"] + grid["step"] * k, 10) for k in range(grid["count"])]


def _grid_problems(config: Mapping[str, Any]) -> list[str]:
    grid = config["threshold_grid"]
    edges = grid_edges(grid)
    problems = []
    if not (edges[0] > 0 and edges[-1] <= 1.0):
        fits = int((1.0 - grid["start"]) / grid["step"] + 1e-9) + 1 if 0 < grid["start"] <= 1 else 0
        problems.append(
            f"config key 'threshold_grid' {dict(grid)} gives edges {edges[0]:g}..{edges[-1]:g}; every edge is a "
            f"cosine threshold and must lie in (0, 1]"
            + (f": with this start and step use count <= {fits}" if fits else ": choose start in (0, 1]"))
    baseline = config["paper_baseline"]
    off = [t for t in baseline["thresholds"] if not any(abs(t - e) <= 1e-9 for e in edges)]
    if off:
        problems.append(
            f"config key 'paper_baseline.thresholds' has {off}, which are not edges of 'threshold_grid' "
            f"({edges[0]:g}, {edges[1] if len(edges) > 1 else edges[0]:g}, ..., {edges[-1]:g}); the search only "
            "keeps matches per grid bin, so put the grid through these values or change them")
    if len(baseline["thresholds"]) != len(baseline["weights"]):
        problems.append(
            f"config keys 'paper_baseline.thresholds' ({len(baseline['thresholds'])} values) and "
            f"'paper_baseline.weights' ({len(baseline['weights'])} values) must have one value per block each")
    if baseline["weights"] and not sum(baseline["weights"]) > 0:
        problems.append(f"config key 'paper_baseline.weights' {baseline['weights']} must have a positive weight")
    length = config["substring_length"]
    wrong = [p for p in config["case_study_prompts"] if len(p) != length]
    if wrong:
        problems.append(
            f"config key 'case_study_prompts' has {wrong}, which are not 'substring_length' = {length} characters "
            "long; a case study compares a prompt with the strings of that length")
    return problems


def _preset_problems(name: str, preset: Mapping[str, Any]) -> list[str]:
    problems = []
    key = f"presets.{name}"
    model, train, analysis = preset["model"], preset["train"], preset["analysis"]
    if model["n_embed"] % model["n_head"]:
        problems.append(
            f"config key '{key}.model.n_embed' ({model['n_embed']}) must be divisible "
            f"by '{key}.model.n_head' ({model['n_head']})"
        )
    ends = [p["until"] for p in train["phases"]]
    if ends != sorted(set(ends)):
        problems.append(f"config key '{key}.train.phases': 'until' must strictly increase, got {ends}")
    late = [s for s in train["checkpoint_steps"] if s > ends[-1]]
    if late:
        problems.append(
            f"config key '{key}.train.checkpoint_steps' has steps {late} after the last phase ends ({ends[-1]})"
        )
    n = analysis["n_prompts"]
    n_tune = int(round(analysis["tune_fraction"] * n))
    if not 0 < n_tune < n:
        problems.append(
            f"config key '{key}.analysis.tune_fraction' ({analysis['tune_fraction']}) of n_prompts ({n}) leaves "
            f"{n_tune} tuning and {n - n_tune} evaluation prompts; both need at least one")
    if analysis["search_shards"] > n:
        problems.append(
            f"config key '{key}.analysis.search_shards' ({analysis['search_shards']}) is more than "
            f"'{key}.analysis.n_prompts' ({n}), so some shards would be empty; use at most {n} (shards need "
            "not divide the prompts evenly: their sizes differ by at most one)")
    if analysis["verify_prompts"] > n:
        problems.append(
            f"config key '{key}.analysis.verify_prompts' ({analysis['verify_prompts']}) exceeds "
            f"'{key}.analysis.n_prompts' ({n}); at most every prompt can be re-checked")
    return problems


def _semantic_problems(config: Mapping[str, Any]) -> list[str]:
    """Constraints JSON Schema cannot say: cross-key ones, and that the chosen preset exists.
    Runs only on a config that passed the schema, so every key is present with its type."""
    problems = []
    presets = config["presets"]
    if config["preset"] not in presets:
        problems.append(
            f"config key 'preset' is {config['preset']!r}, which is not defined under 'presets'; "
            f"choose one of: {', '.join(presets)}"
        )
    problems += _grid_problems(config)
    for name, preset in presets.items():
        problems += _preset_problems(name, preset)
    return problems


def validate_config(config: Mapping[str, Any], schema_path: str | Path) -> None:
    """Raise :class:`ConfigError` listing every problem, each naming its key, or return silently."""
    schema = yaml.safe_load(Path(schema_path).read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path)))
    problems = [line for e in errors for line in _describe(e)]
    if not problems:
        problems = _semantic_problems(config)
    if problems:
        raise ConfigError(
            "invalid configuration (config/config.yaml and --config overrides):\n  - "
            + "\n  - ".join(problems)
            + "\nFix the key in config/config.yaml or on the command line; config/schema.yaml lists what is allowed."
        )


def active_preset(config: Mapping[str, Any]) -> dict[str, Any]:
    return dict(config["presets"][config["preset"]])


def all_seeds(config: Mapping[str, Any]) -> list[int]:
    """The original seed first, then the alternates."""
    return [config["seeds"]["original"], *config["seeds"]["alternates"]]


def model_config(model: Mapping[str, Any], vocab_size: int) -> ModelConfig:
    return ModelConfig(vocab_size=vocab_size, **model)


def train_config(train: Mapping[str, Any], seed: int) -> TrainConfig:
    return TrainConfig(
        seed=seed,
        batch_size=train["batch_size"],
        phases=tuple(Phase(until=p["until"], lr=p["lr"]) for p in train["phases"]),
        eval_interval=train["eval_interval"],
        eval_iters=train["eval_iters"],
        checkpoint_steps=tuple(train["checkpoint_steps"]),
    )
