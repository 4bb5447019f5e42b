#!/usr/bin/env bash
# torch SDPA through attncheck.check on a machine with a GPU, every check of run.py's sdpa family and an
# attncheck.infer per backend each in its own process (the checks are single-threaded; the GPU is shared):
#   bench/frameworks/sdpa_parallel.sh DIR
# writes DIR/logs/<id>.log, DIR/logs/infer-<id>.log and DIR/reports/<id>/ (report.json, summary.md, report.html) and
# prints each verdict, inferred contract and wall time. Environment (defaults): IDS (every sdpa check), INFER_IDS
# (sdpa and each backend), PROFILE (default) and SCALE (2: the budget per dtype, 60 s) of the checks, INFER_SCALE
# (1) of the searches' quick checks, DEVICE (cuda), LIMIT (330 s: a hung process is stopped, its log kept).
set -u
out=${1:?usage: bench/frameworks/sdpa_parallel.sh DIR}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out/logs" "$out/reports"
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
python=${PYTHON:-python3}
pids=()
for id in ${IDS:-sdpa sdpa-math sdpa-flash sdpa-efficient sdpa-cudnn sdpa-unscaled}; do
  timeout "${LIMIT:-330}" "$python" "$here/run.py" --only "$id" --profile "${PROFILE:-default}" \
    --budget-scale "${SCALE:-2}" --sdpa-device "${DEVICE:-cuda}" --report-dir "$out/reports" \
    >"$out/logs/$id.log" 2>&1 &
  pids+=($!)
done
for id in ${INFER_IDS:-sdpa sdpa-math sdpa-flash sdpa-efficient sdpa-cudnn}; do
  timeout "${LIMIT:-330}" "$python" "$here/run.py" --infer --only "$id" --budget-scale "${INFER_SCALE:-1}" \
    --sdpa-device "${DEVICE:-cuda}" >"$out/logs/infer-$id.log" 2>&1 &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=$?; done
grep -H "^total\|^verdict\|^inferred\|^wall\|^skipped" "$out"/logs/*.log
exit $status
