#!/usr/bin/env python3
"""GPU check: Llama-3.1-8B-Instruct (random weights) with a Llama-3.2-1B-Instruct drafter in bf16, built with
PyTorch on CUDA, measured at two batch sizes and two prompt lengths against specsize's prediction.

Needs a CUDA GPU with ~25 GiB free, torch and transformers (pip install 'specsize[measure]'). Finishes in
about 2 minutes on an H100/H200 (random weights are drawn on the GPU). Record the table it prints, with the
date and the GPU, in docs/validation.md.

Run: .venv/bin/python bench/gpu_validate.py [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from specsize.catalog import load_model
from specsize.catalog.models import load_config_dict

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_common import cuda_torch  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", help="also write the table as JSON")
    ap.add_argument("--k", type=int, default=4)
    args = ap.parse_args()
    torch = cuda_torch("gpu_validate")
    if torch is None:
        return 2
    from specsize.measure.run import measure_shapes

    target_id, draft_id = "meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Llama-3.2-1B-Instruct"
    target_cfg, _ = load_config_dict(target_id)
    draft_cfg, _ = load_config_dict(draft_id)
    # Llama 3.1 rope scaling is irrelevant to memory; a shorter position table keeps HF's buffers small
    shapes = [(4, 1024), (4, 4096), (16, 1024), (16, 4096)]
    start = time.time()
    results = measure_shapes(load_model(target_id), target_cfg, None, load_model(draft_id), draft_cfg, None,
                             shapes=shapes, k=args.k, dtype="bfloat16", device="cuda")
    elapsed = time.time() - start
    gpu = torch.cuda.get_device_name(0)
    print(f"{gpu}, torch {torch.__version__}, {time.strftime('%Y-%m-%d')}, {elapsed:.0f} s")
    print(f"{'batch':>5} {'prompt':>6} {'term':44} {'predicted GiB':>14} {'measured GiB':>13} {'error':>8}")
    rows = []
    for r in results:
        for t in r.terms:
            predicted = "-" if t.predicted != t.predicted else f"{t.predicted / 2**30:.4f}"
            error = "-" if t.error is None or t.predicted != t.predicted else f"{t.error:+.2%}"
            print(f"{r.batch_size:>5} {r.prompt_tokens:>6} {t.name:44} {predicted:>14} {t.measured / 2**30:>13.4f} "
                  f"{error:>8}")
            rows.append({"batch_size": r.batch_size, "prompt_tokens": r.prompt_tokens, "term": t.name,
                         "predicted_bytes": None if t.predicted != t.predicted else t.predicted,
                         "measured_bytes": t.measured})
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"gpu": gpu, "date": time.strftime("%Y-%m-%d"), "rows": rows}, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
