# Shared by every stage: the active preset, output paths, wildcard constraints.
from tinylens.config import active_preset, all_seeds

PRESET = config["preset"]
SETTINGS = active_preset(config)
SEEDS = all_seeds(config)


def results(path):
    """Every output lives under results/<preset>/, so presets never overwrite each other."""
    return f"results/{PRESET}/{path}"


wildcard_constraints:
    seed=r"\d+",
