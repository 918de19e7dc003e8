#!/usr/bin/env bash
# The paper preset, every family, on one GPU machine with no network, inside a fixed time budget.
#
#   bash benchmarks/paper_on_gpu.sh SECONDS CORPUS [OUTDIR]
#
# Expects the Python packages the machine lacks as wheels in .whl/ (Snakemake, polars and their
# needs; docs/benchmarks.md says which) and the corpus at CORPUS. Runs `snakemake --keep-going`
# for at most SECONDS, then (also when the time ran out) writes to OUTDIR the per-job times, the
# run's log and a tarball of its small outputs (metrics, benchmark records, figures, findings).
# A second call resumes where the first stopped: finished jobs are kept, interrupted ones rerun.
set -u
budget=${1:?seconds}
corpus=${2:?corpus path}
out=${3:-${OUT:-out}}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || { echo "wheel install failed"; exit 1; }
export PYTHONPATH="/tmp/site:$PWD/src" PATH="/tmp/site/bin:$PATH"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c 'import torch, polars, snakemake; print("torch", torch.__version__, "polars", polars.__version__, "cuda", torch.cuda.is_available())'
python3 benchmarks/workflow_times.py --machine

# The strings' ffwd_out only: the kind the search reads (the other two add 17 GB of Parquet and a minute).
cat >/tmp/overlay.yaml <<'EOF'
presets: {paper: {analysis: {string_kinds: [ffwd_out]}}}
EOF
start=$(date +%s)
# SIGINT: Snakemake stops its jobs and marks them incomplete; the next call reruns them.
timeout -s INT -k 20 "$budget" snakemake --cores 16 --resources gpu=4 --keep-going --scheduler greedy \
    --configfile /tmp/overlay.yaml --config preset=paper device=cuda corpus_url="$corpus" >>"$out/snakemake.log" 2>&1
echo "snakemake exit $? after $(( $(date +%s) - start )) s"
grep -E "steps \([0-9]+%\) done|Error in rule|Finished job" "$out/snakemake.log" | tail -3
python3 benchmarks/workflow_times.py results/paper --jobs --log "$out/snakemake.log" >"$out/times.md" 2>&1
tail -40 "$out/times.md"
find results/paper -type f -size -4M ! -name '*.parquet' ! -name '*.safetensors' ! -name '*.pt' \
    | tar czf "$out/paper_small_outputs.tgz" -T -
ls -la "$out"
