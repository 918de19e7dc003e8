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
from tinylens.train import Phase, TrainConfig, checkpoint_schedule


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


def _semantic_problems(config: Mapping[str, Any]) -> list[str]:
    """Constraints JSON Schema cannot say: cross-field ones, and that the chosen preset exists."""
    problems = []
    presets = config.get("presets", {})
    if config.get("preset") not in presets:
        problems.append(
            f"config key 'preset' is {config.get('preset')!r}, which is not defined under 'presets'; "
            f"choose one of: {', '.join(presets)}"
        )
    for name, preset in presets.items():
        model, train = preset.get("model", {}), preset.get("train", {})
        if model.get("n_embed", 1) % model.get("n_head", 1):
            problems.append(
                f"config key 'presets.{name}.model.n_embed' ({model['n_embed']}) must be divisible "
                f"by 'presets.{name}.model.n_head' ({model['n_head']})"
            )
        ends = [p.get("until") for p in train.get("phases", [])]
        if ends and ends != sorted(set(ends)):
            problems.append(f"config key 'presets.{name}.train.phases': 'until' must strictly increase, got {ends}")
        first = train.get("checkpoints", {}).get("first")
        if ends and first is not None and first >= ends[-1]:
            problems.append(
                f"config key 'presets.{name}.train.checkpoints.first' ({first}) must be below the last step "
                f"({ends[-1]}): checkpoints are log-spaced from it to the last step"
            )
        # --- family: training dynamics (issue 9) ---
        dynamics, context = preset.get("dynamics", {}), model.get("block_size", 0)
        early, late = (dynamics.get("icl_positions") or [0, 1])[:2]
        if not early < late < context:
            problems.append(f"config key 'presets.{name}.dynamics.icl_positions' ({[early, late]}) must be "
                            f"[early, late] with early < late < the context length (model.block_size = {context})")
        repeat = dynamics.get("repeat", {})
        if repeat.get("length", 0) * repeat.get("copies", 0) > context:
            problems.append(f"config key 'presets.{name}.dynamics.repeat': {repeat['copies']} copies of "
                            f"{repeat['length']} tokens exceed the context length ({context})")
        if dynamics.get("energy_windows", 0) > dynamics.get("val_windows", 0):
            problems.append(f"config key 'presets.{name}.dynamics.energy_windows' ({dynamics['energy_windows']}) "
                            f"must not exceed 'val_windows' ({dynamics['val_windows']})")
        # --- end family: training dynamics ---
    return problems


def validate_config(config: Mapping[str, Any], schema_path: str | Path) -> None:
    """Raise :class:`ConfigError` listing every problem, each naming its key, or return silently."""
    schema = yaml.safe_load(Path(schema_path).read_text())
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
        checkpoint_steps=checkpoint_schedule(train["checkpoints"]["first"], train["checkpoints"]["count"],
                                             [p["until"] for p in train["phases"]]),
    )
