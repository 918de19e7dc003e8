"""The family's metrics JSON, with the paper's numbers beside ours (rule supporting_metrics)."""

import json
from pathlib import Path

import numpy as np

from tinylens.atomic import write_json
from tinylens.logs import log_to
from tinylens.supporting import published
from tinylens.supporting.schemas import (
    ENDPOINT_SCHEMA,
    NOISE_SCHEMA,
    SCALING_SCHEMA,
    ablation_schema,
    load_subspace_tokens,
    table_columns,
)
from tinylens.supporting.summary import (
    ablation_section,
    criterion_section,
    headline,
    subspace_section,
    summarize_ablation,
    summarize_endpoint,
    summarize_noise,
    summarize_scaling,
    summarize_stage,
)
from tinylens.tables import read_table


def by_mode(cols, modes):
    mode = np.asarray(cols["mode"])
    return {m: {k: np.asarray(v)[mode == m] for k, v in cols.items()} for m in modes}


with log_to(snakemake.log[0]) as log:
    inp, p = snakemake.input, snakemake.params
    ablation = {seed: table_columns(read_table(path, ablation_schema(p.n_blocks)))
                for seed, path in zip(p.seeds, inp.ablation, strict=True)}
    scaling = by_mode(table_columns(read_table(inp.scaling, SCALING_SCHEMA)), p.modes)
    noise = by_mode(table_columns(read_table(inp.noise, NOISE_SCHEMA)), p.modes)
    endpoint = by_mode(table_columns(read_table(inp.endpoint, ENDPOINT_SCHEMA)), p.modes)
    stages = {}
    for stage, path in zip(p.stages, inp.subspaces):
        stages[stage] = summarize_stage(load_subspace_tokens(path), p.target_nll, p.samples)
    criterion = {m: json.loads(Path(path).read_text()) for m, path in zip(p.modes, inp.criterion)}

    sections = {
        "ablation": ablation_section(summarize_ablation(ablation), p.n_blocks),
        "criterion": criterion_section(criterion, p.n_blocks),
        "token_subspaces": subspace_section(stages, p.n_blocks),
        "final_layernorm": {"paper": published.FINAL_LAYERNORM,
                            "modes": {m: {"scaling": summarize_scaling(scaling[m]), "noise": summarize_noise(noise[m])}
                                      for m in p.modes}},
        "ffwd_endpoint": {m: summarize_endpoint(endpoint[m]) for m in p.modes},
    }
    result = {"headline": headline(sections["ablation"], sections["criterion"], sections["token_subspaces"],
                                   {m: v["scaling"] for m, v in sections["final_layernorm"]["modes"].items()},
                                   sections["ffwd_endpoint"], p.stages),
              **sections}
    write_json(snakemake.output.metrics, result)
    log.info("headline %s -> %s", result["headline"], snakemake.output.metrics)
