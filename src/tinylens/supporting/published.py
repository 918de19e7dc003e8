"""The paper's numbers for the supporting analyses (method.md §7, §12), in one place.

Block keys are 0-based like every file of this family (``5`` is the paper's
block 6). These are compared against, never used in a computation.
"""

from __future__ import annotations

#: Appendix IV, mean Hellinger distance per block after dropping a term. The paper's
#: table came from the one-token continuation (method.md §12), our ``one_token`` context.
ABLATION = {
    "drop_sa": {0: 0.11, 1: 0.07, 2: 0.09, 3: 0.06, 4: 0.04, 5: 0.03},
    "drop_ffwd": {0: 0.70, 1: 0.19, 2: 0.15, 3: 0.13, 4: 0.14, 5: 0.17},
}
ABLATION_CONTEXT = "one_token"

#: Appendix III: mean ln_f output norm of the first 1,000 prompts, unscaled and with the
#: last block's output scaled by 10.
FINAL_LAYERNORM = {"factor": 10.0, "mean_output_norm": 23.1262, "mean_output_norm_scaled": 23.1263}

#: Appendix V: for 'a' at the end of the model (the input of ln_f), sigma_1 > 6 sigma_2.
SUBSPACE_SIGMA_RATIO = {"token": "a", "stage": "ln_f_input", "sigma_ratio_more_than": 6.0}
#: Tokens whose subspace never reached the stopping rule in 50,000 steps (method.md §12).
SUBSPACE_NOT_REACHED = ["$", "&"]

#: "Aggregate performance", percent of prompts meeting the criterion, by 0-based block.
CRITERION_END_OF_MODEL = {5: 81.78, 4: 68.26, 3: 58.15, 2: 57.34, 1: 52.02, 0: 49.71}
CRITERION_SAME_STAGE = {5: 81.78, 4: 50.71, 3: 38.80}
#: The paper's chance level (kernel-density draws, one token set per n): about 16-21%.
CRITERION_CHANCE_PERCENT = (16.0, 21.0)
