#!/usr/bin/env bash
# The GPU figures of bench/RESULTS.md in one run, each step under its own time limit (and all of them under
# DEADLINE seconds, if set) so that one slow step leaves the others' figures. Random weights of the published
# shapes: nothing is downloaded.
#
#   bench/gpu.sh LOG [PASSAGES [MODEL [INDEX]]]
#
# LOG: the file every step's output is appended to. PASSAGES: a collection slice (JSON lines, optionally .gz) for
# the encoder's rates (default: the Wikipedia collection under CAST_DATA). MODEL: a sentence-transformers folder
# (default: the bundled all-MiniLM-L6-v2; `bench/encoders.py random-model` makes one with random weights from its
# configuration). INDEX: an index built from PASSAGES, for `cast index embed` end to end (skipped without).
#
# STEPS (environment): the steps to run, by name, in this order (default: the first seven):
#   encoder-host    where the bi-encoder's time goes: host tokenising, device, pipeline (bench/encoders.py host)
#   encoder         passages/s: sentence-transformers' encode against the toolkit's pipeline, fp16 and fp32
#   embed           `cast index embed --device cuda` on INDEX, float16
#   bart-fp32       BART-large answers, float32: plain against graphed (same tokens?), each profiled
#   llm-small       SmolLM2-135M's shape served by `transformers serve` (continuous batching): rewrites and
#                   answers at concurrency 1 and 16 (needs fastapi, uvicorn, openai, and CAST_DATA's CAsT 2022 dev
#                   topics and provenance passages)
#   bart-bf16       the same as bart-fp32 in bfloat16 (why bfloat16's plain step is slower)
#   llm             Qwen2.5-7B's shape, as llm-small
#   paper-shapes, paper-compiled, seq2seq-others: the paper profile's rewrite + re-rank (plain, compiled) and
#                   T5-base / PEGASUS-large answers
set -u
log=${1:?usage: bench/gpu.sh LOG [PASSAGES [MODEL [INDEX]]]}
passages=${2:-}
model=${3:-}
index=${4:-}
bench=$(dirname "$0")
python=${PYTHON:-python}
export PYTHONUNBUFFERED=1
steps=${STEPS:-encoder-host encoder embed bart-fp32 llm-small bart-bf16 llm}
deadline=$((SECONDS + ${DEADLINE:-100000}))

step() {  # step NAME SECONDS COMMAND...: the command's output appended to the log, stopped after SECONDS
    local name=$1 limit=$2
    shift 2
    case " $steps " in *" $name "*) ;; *) return ;; esac
    local left=$((deadline - SECONDS))
    if [ "$left" -lt 20 ]; then
        echo "== $name: skipped, the deadline is near" | tee -a "$log"
        return
    fi
    [ "$left" -lt "$limit" ] && limit=$left
    echo "== $(date -u +%H:%M:%S) [$name, ${limit}s] $*" | tee -a "$log"
    timeout "$limit" "$@" 2>&1 | tee -a "$log"
    echo "== exit ${PIPESTATUS[0]}" | tee -a "$log"
}

{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    "$python" -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
} 2>&1 | tee -a "$log"
slice=()
[ -n "$passages" ] && slice+=(--input "$passages")
[ -n "$model" ] && slice+=(--model "$model")
step encoder-host 90 "$python" "$bench/encoders.py" host --device cuda --precision fp16 --passages 20000 \
    --threads 1 4 16 "${slice[@]}"
step encoder 120 "$python" "$bench/encoders.py" speed --device cuda --backends st-fp16 torch-fp16 torch \
    --passages 20000 --rounds 2 --batch-size 512 "${slice[@]}"
if [ -n "$index" ] && [ -n "$passages" ]; then
    embed=(--index "$index" --input "$passages" --device cuda --set encoder.precision=float16 --batch-size 512
           --overwrite)
    [ -n "$model" ] && embed+=(--set "reranker.model=$model")
    step embed 90 "$python" -m cast.cli index embed "${embed[@]}"
fi
bart=(--device cuda --models bart-large --decoding plain graphed --repeats 5 --profile)
step bart-fp32 120 "$python" "$bench/generation_latency.py" --dtype float32 "${bart[@]}"
step llm-small 150 "$python" "$bench/llm.py" --engine smollm2-135m --engine-device cuda \
    --engine-continuous-batching --turns 16 --concurrency 1 16
step bart-bf16 120 "$python" "$bench/generation_latency.py" --dtype bfloat16 "${bart[@]}"
step llm 300 "$python" "$bench/llm.py" --engine qwen2.5-7b --engine-device cuda --engine-continuous-batching \
    --turns 8 --concurrency 1 16
step paper-shapes 120 "$python" "$bench/latency.py" paper-shapes --device cuda --turns 20
step paper-compiled 90 "$python" "$bench/latency.py" paper-shapes --device cuda --turns 20 --decoding compiled
step seq2seq-others 240 "$python" "$bench/generation_latency.py" --device cuda --models t5-base pegasus-large \
    --dtype bfloat16 --decoding plain static compiled --repeats 5
