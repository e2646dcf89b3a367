#!/usr/bin/env python3
"""Regenerate the embedded model catalog from ../shared/model-configs.

Each catalog entry is one JSON file: {"id", "config", "source", "copy_kind", "params_published", "notes"}.
The config is kept exactly as found; specsize reads it with the same loader as a user's config.json.
Run: python3 dev.py catalog [--shared PATH]
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "src" / "specsize" / "catalog" / "data" / "models"
# Configs kept in this repository (same layout as ../shared/model-configs): whole configs with a source.json,
# or an overlay.json ({"overlay": fields, "source", "notes"}) adding published fields a shared copy lacks
# (the vision sections of multimodal checkpoints).
EXTRA = ROOT / "tools" / "model-configs-extra"

# Published checkpoints whose architecture is identical to a vendored config (same fields, other weights).
# Each alias names the entry it borrows and why that is exact.
ALIASES = {
    "mistralai/Mixtral-8x7B-Instruct-v0.1": (
        "mistralai/Mixtral-8x7B-v0.1",
        "Instruct fine-tune of the base model; architecture fields identical (Mistral AI model card).",
    ),
    "meta-llama/Meta-Llama-3.1-8B-Instruct": (
        "meta-llama/Llama-3.1-8B-Instruct",
        "Former repository name of the same checkpoint.",
    ),
    "meta-llama/Meta-Llama-3.1-70B-Instruct": (
        "meta-llama/Llama-3.1-70B-Instruct",
        "Former repository name of the same checkpoint.",
    ),
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shared", default=str(ROOT.parent / "shared" / "model-configs"))
    ap.add_argument("--out", default=str(OUT), help="the folder to write (tests rebuild into a scratch folder)")
    args = ap.parse_args()
    src, out = Path(args.shared), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.json"):
        old.unlink()
    entries = {}
    for cfg in sorted(src.glob("*/*/config.json")):
        model_id = f"{cfg.parent.parent.name}/{cfg.parent.name}"
        meta = json.loads((cfg.parent / "source.json").read_text())
        entries[model_id] = {
            "id": model_id,
            "config": json.loads(cfg.read_text()),
            "source": meta.get("source"),
            "copy_kind": meta.get("copy_kind"),
            "params_published": meta.get("params_published"),
            "notes": meta.get("notes"),
        }
    kept: set[str] = set()  # entries this repository keeps whole: an alias below does not replace them
    for cfg in sorted(EXTRA.glob("*/*/config.json")):
        model_id = f"{cfg.parent.parent.name}/{cfg.parent.name}"
        meta = json.loads((cfg.parent / "source.json").read_text())
        # the entry's own fields as its source.json writes them (source, copy_kind, params_published, notes, and
        # alias_of where it is a published alias whose config the repository corrects)
        entries[model_id] = {"id": model_id, "config": json.loads(cfg.read_text()), **meta}
        kept.add(model_id)
    for path in sorted(EXTRA.glob("*/*/overlay.json")):
        model_id = f"{path.parent.parent.name}/{path.parent.name}"
        extra = json.loads(path.read_text())
        entry = entries[model_id]
        entry["config"] = {**entry["config"], **extra["overlay"]}
        entry["source"] = f"{entry['source']}; {', '.join(extra['overlay'])} from {extra['source']}"
        entry["notes"] = f"{entry.get('notes') or ''} {extra['notes']}".strip()
    for alias, (base, why) in ALIASES.items():
        if alias in kept:
            continue
        entry = dict(entries[base])
        entry.update(id=alias, alias_of=base, notes=f"{why} {entry.get('notes') or ''}".strip())
        entries[alias] = entry
    for model_id, entry in sorted(entries.items()):
        (out / (model_id.replace("/", "__") + ".json")).write_text(json.dumps(entry, indent=1) + "\n")
    print(f"wrote {len(entries)} catalog entries to {out}")


if __name__ == "__main__":
    main()
