#!/usr/bin/env bash
# The GPU figures of bench/RESULTS.md in one run, each step under its own time limit so that one slow step leaves
# the others' figures: the paper's generators at their real shapes (plain / static / compiled decoding, bf16 and
# fp32), the paper profile's rewrite + monoBERT re-rank, and the bi-encoder's rate on the GPU (that of
# `cast index embed --device cuda`), and last the LLM stages against `transformers serve` on the GPU (needs
# fastapi, uvicorn, openai and accelerate beside transformers, and CAST_DATA's CAsT 2022 dev topics and provenance
# passages). Random weights of the published shapes: nothing is downloaded.
#
#   bench/gpu.sh LOG [PASSAGES [MODEL]]
#
# LOG: the file every step's output is appended to. PASSAGES: a collection slice (JSON lines, optionally .gz) for
# the encoder's rate (default: the Wikipedia collection under CAST_DATA). MODEL: a sentence-transformers folder
# (default: the bundled all-MiniLM-L6-v2). STEPS (environment): the names of the steps to run, e.g.
# STEPS="bart-fp32 llm" (default: all): seq2seq-bf16, paper-shapes, encoder, bart-fp32, paper-compiled,
# seq2seq-others, llm. A machine lent for a few minutes runs them over several calls.
set -u
log=${1:?usage: bench/gpu.sh LOG [PASSAGES [MODEL]]}
passages=${2:-}
model=${3:-}
bench=$(dirname "$0")
python=${PYTHON:-python}
export PYTHONUNBUFFERED=1

step() {  # step NAME SECONDS COMMAND...: the command's output appended to the log, stopped after SECONDS
    local name=$1 limit=$2
    shift 2
    case " ${STEPS:-$name} " in *" $name "*) ;; *) return ;; esac
    echo "== $(date -u +%H:%M:%S) $*" | tee -a "$log"
    timeout "$limit" "$@" 2>&1 | tee -a "$log"
    echo "== exit ${PIPESTATUS[0]}" | tee -a "$log"
}

{
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
    "$python" -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
} 2>&1 | tee -a "$log"
# The targets' model first: BART-large answers (3 passages, 100 new tokens, 4 beams), bf16 then fp32.
step seq2seq-bf16 150 "$python" "$bench/generation_latency.py" --device cuda --models bart-large --dtype bfloat16 \
    --decoding plain static compiled --repeats 5
step paper-shapes 120 "$python" "$bench/latency.py" paper-shapes --device cuda --turns 20
encoder=(--device cuda --backends torch torch-fp16 --passages 20000 --rounds 2 --batch-size 128 512)
[ -n "$passages" ] && encoder+=(--input "$passages")
[ -n "$model" ] && encoder+=(--model "$model")
step encoder 120 "$python" "$bench/encoders.py" speed "${encoder[@]}"
step bart-fp32 120 "$python" "$bench/generation_latency.py" --device cuda --models bart-large --dtype float32 \
    --decoding plain static compiled --repeats 5
step paper-compiled 90 "$python" "$bench/latency.py" paper-shapes --device cuda --turns 20 --decoding compiled
step seq2seq-others 240 "$python" "$bench/generation_latency.py" --device cuda --models t5-base pegasus-large \
    --dtype bfloat16 --decoding plain static compiled --repeats 5
step llm 420 "$python" "$bench/llm.py" --engine qwen2.5-7b --engine-device cuda --turns 16 --concurrency 1 16
