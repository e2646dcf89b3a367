"""Find a model: the embedded catalog, a local config.json or model directory, or the Hugging Face hub.

Order: an existing local path, then the catalog (by Hugging Face id, case-insensitive), then the hub when
huggingface_hub is installed and the machine is online, then a published variant of a catalog model read from
its id (catalog.variants: a quantized checkpoint, a mirror, a revision; priced as that model, with a note). Exact
weight bytes come from safetensors headers (or `model.safetensors.index.json`) when a directory has them.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, replace
import json
import math
import os
import re
import struct
from functools import lru_cache
from pathlib import Path

from ..core.errors import SpecError, first_repeated
from ..core.specs import VARIANT_SOURCE, ModelSpec, quantization_override
from .configs import MODELLED_TYPES, REQUIRED, _whole, spec_from_config
from .files import DATA_DIR, RowCheck, packaged_json, read_text, row_label
from .variants import Variant, variant_of

MODELS_DIR = "models"
# config.json fields that, when present and not null, size the model: positive integers
_OPTIONAL_SIZES = ("num_key_value_heads", "head_dim", "intermediate_size", "max_position_embeddings")


@lru_cache(maxsize=1)
def _catalog_index() -> dict[str, str]:
    """lower-case id -> resource file name."""
    folder = DATA_DIR / MODELS_DIR
    index = {}
    for entry in folder.iterdir():
        if entry.name.endswith(".json"):
            index[entry.name[:-5].replace("__", "/").lower()] = entry.name
    return index


def validate_model_entry(file_name: str, entry: object) -> dict:
    """One model-catalog file's content, checked: a bad one raises SpecError naming the file and the row (its id).

    Required: id (a non-empty string; for a file named ORG__NAME.json it is ORG/NAME, ignoring case),
    source (a non-empty string), config (a config.json object whose hidden_size, num_hidden_layers,
    num_attention_heads and vocab_size, or those of its text_config, are positive integers; head_dim,
    num_key_value_heads, intermediate_size and max_position_embeddings too when set). Optional:
    params_published (null or an object with a value and a source), alias_of, copy_kind, notes (strings or null).
    """
    check = RowCheck(file_name, row_label(entry), entry)
    model_id = check.text("id")
    assert model_id is not None  # required above
    base = file_name.rsplit("/", 1)[-1]
    if base.endswith(".json") and base[:-5].replace("__", "/").lower() != model_id.lower():
        raise check.fail("id", f"does not match the file name (which stands for {base[:-5].replace('__', '/')!r})",
                         "a file named ORG__NAME.json holding the id ORG/NAME")
    check.text("source")
    for key in ("alias_of", "copy_kind", "notes"):
        check.text(key, required=False, nullable=True)
    published = check.mapping("params_published", required=False, nullable=True)
    if published is not None:
        sub = RowCheck(file_name, check.row, published, "params_published.")
        value = sub.data.get("value")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            sub.number("value")
        else:
            sub.text("value")
        sub.text("source")
    config = check.mapping("config")
    assert config is not None  # required above
    if not config:
        raise check.fail("config", "is empty", "a config.json object")
    text = config.get("text_config")
    sizes = RowCheck(file_name, check.row, text, "config.text_config.") \
        if isinstance(text, dict) and "hidden_size" in text else RowCheck(file_name, check.row, config, "config.")
    for key in REQUIRED:
        sizes.number(key, integer=True)
    for key in _OPTIONAL_SIZES:
        sizes.number(key, required=False, nullable=True, integer=True)
    return check.data


@lru_cache(maxsize=None)
def catalog_entry(model_id: str) -> dict:
    name = _catalog_index()[model_id.lower()]
    return validate_model_entry(f"{MODELS_DIR}/{name}", packaged_json(f"{MODELS_DIR}/{name}"))


def catalog_vocab(model_id: str) -> int | None:
    """A catalog model's vocabulary as its config gives it (its text_config's, where it has one), read without
    building its spec; None where the spec derives it (Medusa's heads)."""
    config = catalog_entry(model_id)["config"]
    text = config.get("text_config")
    sizes = text if isinstance(text, dict) and "hidden_size" in text else config
    return None if "medusa_num_heads" in config else int(sizes["vocab_size"])


def catalog_ids() -> list[str]:
    return sorted(catalog_entry(key)["id"] for key in _catalog_index())


def _from_catalog(model_id: str) -> ModelSpec:
    entry = catalog_entry(model_id)
    published = entry.get("params_published") or {}
    return spec_from_config(entry["config"], entry["id"], f"catalog: {entry['source']}",
                            params_published=published.get("value") if isinstance(published, dict) else None)


def _read_json(path: Path, field: str) -> dict:
    text = read_text(path, "config", "a config.json file")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise SpecError(field, f"{path} is not valid JSON ({err.msg} at line {err.lineno})", "a JSON file") from None
    except RecursionError:
        raise SpecError(field, f"{path} nests too deeply to be a config", "a JSON object") from None
    except ValueError:  # past Python's int-conversion limit: a number of over 4,300 digits
        raise SpecError(field, f"{path} holds a number too long to read (over 4,300 digits)",
                        "a JSON file of numbers a config can hold") from None
    if not isinstance(data, dict):
        raise SpecError(field, f"{path} holds a JSON {type(data).__name__}, not an object", "a JSON object")
    return data


WEIGHTS_ACCEPTED = "a complete safetensors checkpoint (header length, JSON header, tensors with data_offsets)"


def _no_duplicates(pairs: list) -> dict:
    twice = first_repeated(key for key, _ in pairs)
    if twice is not None:
        raise SpecError("weights", f"the header names {twice!r} twice", WEIGHTS_ACCEPTED)
    return dict(pairs)


LFS_POINTER = b"version https://git-lfs.github.com/spec/"  # what a file of a repository cloned without git-lfs holds


def safetensors_header(path: Path) -> dict:
    """The JSON header of one .safetensors file (8-byte little-endian length, then JSON), checked: a JSON object
    of tensors, each with a dtype, a shape of whole numbers and data_offsets [begin, end] inside the file's data."""
    def bad(problem: str, accepted: str = WEIGHTS_ACCEPTED) -> SpecError:
        return SpecError("weights", f"{path}: {problem}", accepted)

    if not path.is_file():
        raise bad("is not a file")
    try:
        with path.open("rb") as handle:
            raw = handle.read(8)
            if len(raw) != 8:
                raise bad("too short to be a safetensors file")
            if raw == LFS_POINTER[:8]:
                raise bad("is a Git LFS pointer, not the weights (a clone without git-lfs: run `git lfs pull`)")
            (length,) = struct.unpack("<Q", raw)
            size = path.stat().st_size
            if length > 100_000_000 or length > size - 8:
                raise bad(f"a header of {length:,} bytes in a file of {size:,}")
            text = handle.read(length)
    except OSError as err:
        raise bad(f"cannot be read ({err.strerror or err})") from None
    try:
        header = json.loads(text, object_pairs_hook=_no_duplicates)
    except SpecError as err:
        raise bad(err.problem) from None
    except (ValueError, RecursionError):  # not JSON, not UTF-8, nested past the parser's depth
        raise bad("a corrupt header (not a JSON object)") from None
    if not isinstance(header, dict):
        raise bad("a corrupt header (not a JSON object)")
    data = size - 8 - length  # 0: a file of the header alone (what specsize reads), its offsets not checkable
    for name, info in header.items():
        if name == "__metadata__":
            continue
        offsets = info.get("data_offsets") if isinstance(info, dict) else None
        shape = info.get("shape", []) if isinstance(info, dict) else None
        if not (isinstance(offsets, list) and len(offsets) == 2 and all(_whole(v, 0) for v in offsets)
                and offsets[0] <= offsets[1] and (data == 0 or offsets[1] <= data)):
            within = f" <= {data:,}, the data's size" if data else ""
            raise bad(f"tensor {name!r} has data_offsets {offsets!r}", f"[begin, end], 0 <= begin <= end{within}")
        if not (isinstance(shape, list) and all(_whole(v, 0) for v in shape)):
            raise bad(f"tensor {name!r} has shape {shape!r}, not a list of whole numbers")
    return header


def _index_shards(index: Path) -> tuple[int | None, set[str], dict]:
    """total_size, the shard files and the weight_map of a model.safetensors.index.json."""
    data = _read_json(index, "weights")
    meta, weight_map = data.get("metadata") or {}, data.get("weight_map") or {}
    if not isinstance(meta, dict) or not isinstance(weight_map, dict):
        raise SpecError("weights", f"{index}: metadata and weight_map must be objects", WEIGHTS_ACCEPTED)
    size = meta.get("total_size")
    if size is not None and not (_whole(size) and size < 1 << 50):
        raise SpecError("weights", f"{index}: total_size {size!r}", "a whole number of bytes, above 0")
    shards = {str(name) for name in weight_map.values()}
    return size, shards, weight_map


# safetensors dtypes an engine casts to the served dtype when it loads an unquantized tensor
FLOAT_DTYPES = frozenset({"F64", "F32", "F16", "BF16"})


@dataclass(frozen=True)
class WeightCount:
    """A checkpoint's weight bytes as stored, and of them the floating-point tensors (FLOAT_DTYPES, quantization
    scales aside) as bytes and as elements: vLLM loads those at the served dtype (ModelSpec.weight_bytes_served)."""
    total: int
    float_bytes: int = 0
    float_elements: int | None = None  # None: not known (an index's total_size alone)


@dataclass(frozen=True)
class Checkpoint:
    """What a model directory's safetensors files say: every tensor's header entry (dtype, shape, data_offsets) from
    its shards, or, with no shard there, the names and total_size of its index (model.safetensors.index.json)."""
    tensors: dict[str, dict]
    index_names: frozenset[str] = frozenset()
    total_size: int | None = None

    @property
    def names(self) -> set[str]:
        return set(self.tensors) or set(self.index_names)

    def weight_bytes(self, skip_layers_from: int | None = None) -> int | None:
        """Exact weight bytes as stored (weight_count)."""
        count = self.weight_count(skip_layers_from)
        return None if count is None else count.total

    def weight_count(self, skip_layers_from: int | None = None) -> WeightCount | None:
        """Exact weight bytes (the index's total_size without shards). Tensors of layers numbered
        `skip_layers_from` and up (DeepSeek's MTP layers, which vLLM loads only into the drafter) and `mtp.`
        tensors (Qwen3-Next / Qwen3.5) are left out when the shard headers are there to tell them apart."""
        if not self.tensors:
            return None if self.total_size is None else WeightCount(self.total_size)
        total = float_bytes = float_elements = 0
        for name, info in self.tensors.items():
            layer = _layer_number(name)
            if name.startswith("mtp.") or (skip_layers_from is not None and layer is not None
                                           and layer >= skip_layers_from):
                continue
            begin, end = info["data_offsets"]
            total += end - begin
            if info.get("dtype") in FLOAT_DTYPES and "scale" not in name.rsplit(".", 1)[-1]:
                float_bytes += end - begin
                float_elements += math.prod(info.get("shape") or [])
        return WeightCount(total, float_bytes, float_elements)


def read_checkpoint(directory: Path) -> Checkpoint | None:
    """The directory's safetensors data, each shard header read once and checked (safetensors_header); None when
    it holds neither shards nor an index. With an index, only the shards its weight_map names are read, as vLLM
    does (weight_utils.py filter_duplicate_safetensors_files: Mistral's repos also hold consolidated.safetensors,
    the same weights again). A directory whose index names shards it does not hold (an interrupted download) is
    refused: its headers would undercount."""
    shards = sorted(directory.glob("*.safetensors"))
    index = directory / "model.safetensors.index.json"
    if not shards and not index.exists():
        return None
    size, listed, weight_map = _index_shards(index) if index.exists() else (None, set(), {})
    missing = sorted(listed - {shard.name for shard in shards})
    if shards and missing:
        raise SpecError("weights", f"{directory}: {len(missing)} of the {len(listed)} shards its index lists are "
                                   f"missing ({missing[0]}{', ...' if len(missing) > 1 else ''})",
                        "every shard model.safetensors.index.json names (an interrupted download?)")
    if listed:
        shards = [shard for shard in shards if shard.name in listed]
    else:
        _check_numbered_shards(directory, shards)
    tensors = {name: info for shard in shards for name, info in safetensors_header(shard).items()
               if name != "__metadata__"}
    return Checkpoint(tensors=tensors, index_names=frozenset(weight_map), total_size=size)


_NUMBERED_SHARD = re.compile(r"^(?P<stem>.+)-(?P<part>\d+)-of-(?P<total>\d+)\.safetensors$")


def _check_numbered_shards(directory: Path, shards: list[Path]) -> None:
    """Without an index, shards named as transformers' save_pretrained numbers them (model-00001-of-00004.safetensors)
    must all be there: a folder holding some of them (a download of "*.safetensors" cut short, the index not yet
    fetched) would otherwise pass as a smaller checkpoint, and vLLM, loading what is there, fails on the weights the
    missing shards hold."""
    series: dict[tuple[str, str], set[int]] = {}
    for shard in shards:
        found = _NUMBERED_SHARD.match(shard.name)
        if found:
            series.setdefault((found["stem"], found["total"]), set()).add(int(found["part"]))
    for (stem, total), parts in sorted(series.items()):
        missing = [n for n in range(1, int(total) + 1) if n not in parts]
        if missing:
            first = f"{stem}-{missing[0]:0{len(total)}d}-of-{total}.safetensors"
            raise SpecError("weights", f"{directory}: {len(missing)} of the {int(total)} shards {stem}-*-of-{total}"
                                       f".safetensors are missing ({first}{', ...' if len(missing) > 1 else ''})",
                            "every shard of the checkpoint (an interrupted download?)")


def _head_weights(checkpoint: Checkpoint, directory: Path, spec: ModelSpec) -> ModelSpec:
    """A speculator head sized from its own weights: one that ships an input embedding keeps it (vLLM's
    EAGLE proposer shares the target's only when the head has none, or an identical one:
    vllm/v1/spec_decode/llm_base_proposer.py `_maybe_share_embeddings`), and an lm_head wider than the
    config's draft_vocab_size is the one it loads."""
    tensors = checkpoint.tensors
    own = any(name.endswith("embed_tokens.weight") for name in tensors)
    heads = [info["shape"][0] for name, info in tensors.items()
             if name.endswith("lm_head.weight") and info.get("shape")]
    if heads and not 1 <= heads[0] <= 1 << 27:  # as config.json's draft_vocab_size (catalog.configs bounds)
        raise SpecError("weights", f"{directory}: an lm_head of {heads[0]:,} rows", "1 to 134,217,728 rows")
    changes: dict = {}
    if own:
        changes["own_embedding"] = True
    if heads and heads[0] != spec.draft_vocab_size:
        changes["draft_vocab_size"] = heads[0]  # its own lm_head, as wide as its weights say
    return spec.with_(**changes) if changes else spec


def _layer_number(tensor_name: str) -> int | None:
    parts = tensor_name.split(".")
    for i, part in enumerate(parts[:-1]):
        if part == "layers" and parts[i + 1].isdigit():
            return int(parts[i + 1])
    return None


def _from_path(path: Path, model_id: str | None = None) -> ModelSpec:
    config_path = path / "config.json" if path.is_dir() else path
    if not config_path.exists():
        raise SpecError("model", f"{path} has no config.json", "a config.json file or a model directory holding one")
    cfg = _with_hf_quant_config(_read_json(config_path, "model"), config_path.parent)
    name = model_id or (path.name if path.is_dir() else path.parent.name or str(path))
    _require_model_type(cfg, name)
    checkpoint = read_checkpoint(path) if path.is_dir() else None
    spec = spec_from_config(cfg, name, f"local: {config_path}")  # the config checked before its sizes are read
    count = None
    if checkpoint is not None:
        nested = cfg.get("text_config")
        text: dict = nested if isinstance(nested, dict) else cfg
        count = checkpoint.weight_count(spec.num_layers if text.get("num_nextn_predict_layers") else None)
    if count is not None:
        spec = spec.with_(weight_bytes_exact=count.total, weight_float_bytes=count.float_bytes,
                          weight_float_elements=count.float_elements)
    if checkpoint is not None and spec.eagle_fc_inputs:  # a head: sized from its own weights
        return _head_weights(checkpoint, path, spec)
    if checkpoint is not None and count is not None:
        _check_plausible(spec, spec.weight_bytes_served(spec.dtype) or count.total, checkpoint.names, path)
    return spec


HF_QUANT_CONFIG = "hf_quant_config.json"  # ModelOpt (<= 0.29) keeps a checkpoint's quantization here, not in config.json


def _declares_quantization(cfg: dict) -> bool:
    text = cfg.get("text_config")
    return any(isinstance(c, dict) and (c.get("quantization_config") or c.get("compression_config"))
               for c in (cfg, text))


def _with_hf_quant_config(cfg: dict, directory: Path) -> dict:
    """The config with the quantization of the model folder's hf_quant_config.json where config.json declares none,
    as vLLM reads a model (vllm/transformers_utils/config.py get_config: "ModelOpt 0.29.0 and before saves the
    quantization config in a separate hf_quant_config.json"; nvidia/Llama-3.1-8B-Instruct-FP8 and the like)."""
    extra = directory / HF_QUANT_CONFIG
    if _declares_quantization(cfg) or not extra.is_file():
        return cfg
    return {**cfg, "quantization_config": _read_json(extra, "model")}


# the checkpoint's bytes against its config's: a checkpoint stored wider than its config's dtype (fp32 copies) or
# with quantization scales stays well inside; a quarter or less of the config's weights is a partial checkpoint
PLAUSIBLE_WEIGHTS = (0.25, 4.0)


def _check_plausible(spec: ModelSpec, exact: int, names: set[str], path: Path) -> None:
    """Refuse safetensors bytes that cannot be this config's weights (an index's total_size of 1, headers of a
    few tensors): they would plan the target far smaller than it is. `names`: the tensors the checkpoint holds."""
    from ..core.weights import weight_breakdown  # noqa: PLC0415

    parts = weight_breakdown(spec, 1, 1, spec.dtype, spec.quantization, rotary_cache=False, include_mtp=True)
    arch = parts.total
    if names and not any("embed_tokens" in name or name.endswith("wte.weight") for name in names):
        arch -= parts.embedding  # a head that shares the target's embedding (EAGLE-1 heads declared as Llama)
    if names and not any(name.endswith("lm_head.weight") for name in names):
        arch -= parts.lm_head  # ... and its lm_head, or a tied one
    low, high = PLAUSIBLE_WEIGHTS
    if arch and not low <= exact / arch <= high:
        raise SpecError("weights", f"{path}: the safetensors data holds {exact:,} bytes, {exact / arch:.3g}x the "
                                   f"{arch:,} bytes its config.json describes",
                        f"a complete checkpoint of this config ({low:g}x-{high:g}x its bytes)")


# set (the service sets it for its process and its jobs): models by name only, the catalog's and their published
# variants; no local path and no hub is read
NAMES_ONLY_ENV = "SPECSIZE_MODELS_BY_NAME_ONLY"


def _from_hub(model_id: str) -> ModelSpec:
    """Download config.json and read safetensors metadata from the hub (needs network and huggingface_hub)."""
    if os.environ.get(NAMES_ONLY_ENV):
        raise HubMiss("model", f"{model_id!r} is not in the catalog (this server reads no hub){_suggest(model_id)}",
                      "a catalog id (specsize models) or a published variant of one (-FP8, -AWQ, ...)")
    try:
        import huggingface_hub  # noqa: PLC0415 - optional, only for users who are online
    except ImportError:
        raise HubMiss("model", f"{model_id!r} is not in the catalog{_suggest(model_id)}",
                        "a catalog id (specsize models), a local config.json or model directory, "
                        "or a hub id with huggingface_hub installed") from None
    if not os.environ.get("HF_HUB_OFFLINE") and not _hub_reachable():
        raise HubMiss("model", f"{model_id!r} is not in the catalog and the Hugging Face hub cannot be reached"
                        f"{_suggest(model_id)}", "a catalog id (specsize models), a local config.json or model "
                        "directory") from None
    try:
        config_file = huggingface_hub.hf_hub_download(model_id, "config.json")
    except Exception as err:  # offline, gated, or not found: all read the same to the user
        raise HubMiss("model", f"{model_id!r} is not in the catalog and the hub could not provide it "
                        f"({type(err).__name__}){_suggest(model_id)}",
                        "a catalog id (specsize models), a local config.json or model directory") from None
    exact, floats = None, {}
    try:
        meta = huggingface_hub.get_safetensors_metadata(model_id)
        sizes = {"F64": 8, "F32": 4, "BF16": 2, "F16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
                 "F8_E4M3": 1, "F8_E5M2": 1, "BOOL": 1}
        exact = sum(count * sizes.get(dtype, 2) for dtype, count in meta.parameter_count.items()) or None
        floats = {dtype: count for dtype, count in meta.parameter_count.items() if dtype in FLOAT_DTYPES}
    except Exception:  # metadata is a refinement; the config alone still sizes the model
        exact = None
    cfg = _read_json(Path(config_file), "model")
    _require_model_type(cfg, model_id)
    if not _declares_quantization(cfg):  # a ModelOpt checkpoint may keep it beside the config, as vLLM reads it
        try:
            huggingface_hub.hf_hub_download(model_id, HF_QUANT_CONFIG)  # into the config's snapshot folder
        except Exception:  # most repositories have none
            pass
        cfg = _with_hf_quant_config(cfg, Path(config_file).parent)
    spec = spec_from_config(cfg, model_id, f"hub: {model_id}", weight_bytes_exact=exact)
    if exact is None:
        return spec
    return spec.with_(weight_float_bytes=sum(count * sizes[dtype] for dtype, count in floats.items()),
                      weight_float_elements=sum(floats.values()))


def _require_model_type(cfg: dict, model_id: str) -> None:
    """A user's config.json must say what architecture it is: transformers' AutoConfig, and so vLLM and SGLang,
    refuse one without model_type, and specsize will not guess (a guess would plan it as a dense Llama). Medusa's
    head config is the exception: it is read by its own fields."""
    if "medusa_num_heads" in cfg:  # Medusa's own head config (FasterDecoding/Medusa) carries no model_type
        return
    if not isinstance(cfg.get("model_type"), str) or not cfg["model_type"]:
        raise SpecError("config.json:model_type", f"{model_id}: the config has no model_type, so its architecture "
                        "is unknown (vLLM cannot load it either)", "a config.json with model_type, one of "
                        + ", ".join(MODELLED_TYPES))


def _hub_reachable(timeout_s: float = 2.0) -> bool:
    """A quick TCP probe, so that an offline machine answers at once instead of after the hub client's retries.
    The hub client's own endpoint setting (HF_ENDPOINT) is honoured."""
    import socket  # noqa: PLC0415
    from urllib.parse import urlparse  # noqa: PLC0415

    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    try:
        with socket.create_connection((url.hostname, url.port or 443), timeout=timeout_s):
            return True
    except OSError:
        return False


def _suggest(model_id: str) -> str:
    ids = catalog_ids()
    lowered = {i.lower(): i for i in ids}
    close = difflib.get_close_matches(model_id.lower(), list(lowered), n=3, cutoff=0.4)
    if not close:
        tail = model_id.lower().rsplit("/", 1)[-1]
        close = [key for key in lowered if tail and tail in key][:3]
    return "; did you mean " + ", ".join(lowered[c] for c in close) + "?" if close else ""


def load_model(ref: str) -> ModelSpec:
    """A ModelSpec from a catalog id, a local config.json / model directory, or a hub id; where the hub cannot be
    read (offline, not installed, not there), a published variant of a catalog model (catalog.variants)."""
    if not ref or not str(ref).strip():
        raise SpecError("model", "no model given", "a catalog id (specsize models), a config.json or a directory")
    ref = str(ref).strip()
    path = Path(ref).expanduser()
    if not os.environ.get(NAMES_ONLY_ENV) and exists(path):
        return _from_path(path)
    if ref.lower() in _catalog_index():
        return _from_catalog(ref)
    if ref.endswith(".json") or ref.startswith((".", "/", "~")):
        raise SpecError("model", f"{ref} does not exist", "an existing config.json or model directory")
    if "/" not in ref:
        raise SpecError("model", f"unknown model {ref!r}{_suggest(ref)}", "a catalog id (see `specsize models`)")
    try:
        return _from_hub(ref)
    except HubMiss:  # the hub was not read (a config it served and specsize refuses stays refused)
        variant = variant_of(ref, catalog_ids())
        if variant is None:
            raise
        return _from_variant(variant)


class HubMiss(SpecError):
    """The hub could not be read for a model: huggingface_hub not installed, the hub unreachable, or the download
    refused (not found, gated, offline)."""


def _from_variant(v: Variant) -> ModelSpec:
    """A published variant of a catalog model (catalog.variants): the base's architecture under the variant's id, its
    weights in the format the name says (a stored checkpoint: declared, not quantized at load)."""
    base = _from_catalog(v.base)
    quant = base.quantization
    override = quantization_override(v.quantization, base)
    if override is not None and not (quant is not None and quant.method == override.method):
        # else the base's own layout (what it keeps in 16 bits); a name does not say which config a checkpoint declares
        # (a -FP8 may be fp8, ModelOpt or compressed-tensors): none, but for Qwen's own (below)
        quant = replace(override, source="declared", config_method="")
    if quant is not None and v.fp8_block is not None and quant.method == "fp8" and not quant.block:
        # the publisher's fp8 blocks (catalog.variants.QWEN_FP8_BLOCK), a native fp8 checkpoint's (quant_method fp8)
        quant = replace(quant, block=v.fp8_block, moe_block_refine=True, config_method="fp8")
    return base.with_(model_id=v.model_id, source=f"{VARIANT_SOURCE}: {v.base}", quantization=quant)


def variant_note(m: ModelSpec) -> str | None:
    """What a model read as a variant of a catalog model (VARIANT_SOURCE) was priced as, for the plan's notes; None
    for any other model."""
    if not m.source.startswith(VARIANT_SOURCE):
        return None
    v = variant_of(m.model_id, catalog_ids())
    if v is None:  # a spec built elsewhere under the prefix: nothing more to say
        return None
    weights = (f"{m.quantization.method} weights, as its name says" if v.quantization and m.quantization
               else "the same weights")
    via = f" (read as {' and '.join(v.readings)})" if v.readings else ""
    limit = (f"; its context is planned up to {v.base}'s longest ({m.max_model_len_limit:,} tokens), which a "
             "revision or sibling may exceed" if v.readings else "")
    kv = ("; its KV cache is priced in the model dtype: add --kv-cache-dtype fp8 to serve it with the fp8 KV scales "
          "its name says it carries" if v.fp8_kv else "")
    return (f"{m.model_id} is not in the catalog and was not read from the hub: priced as {v.base}{via} with "
            f"{weights}{limit}{kv}; give its config.json or model directory for the checkpoint's own layout")


def load_model_as(ref: str, field: str) -> ModelSpec:
    """load_model, its errors naming the input that gave `ref` (target, draft) instead of "model" or "config"."""
    try:
        return load_model(ref)
    except SpecError as err:  # a HubMiss stays one (a head method derives its head then)
        if err.field in ("model", "config"):
            raise type(err)(field, err.problem, err.accepted) from None
        raise


def load_target(ref: str) -> ModelSpec:
    """A model to serve (load_model): not a drafter head's own config, which has no decoder layer of its own."""
    m = load_model_as(ref, "target")
    if not m.num_layers:
        raise SpecError("target", f"{ref} is a Medusa head's config (no decoder layers), not a model to serve",
                        "a model's config.json; give the heads with --draft")
    if m.is_head:  # an EAGLE / EAGLE-3 head drafts from the target's hidden states; it serves nothing alone
        shape = "the fc over the target's hidden states" if m.eagle_fc_inputs else f"{m.num_layers} decoder layer"
        raise SpecError("target", f"{ref} is a drafter head's config ({shape}), not a model to serve",
                        "the model the head drafts for; give the head with --draft and --method eagle or eagle3")
    return m


def exists(path: Path) -> bool:
    """Path.exists, where a name no file can have (over 255 bytes, a loop of links) is not a file: an id."""
    try:
        return path.exists()
    except OSError:
        return False


def load_config_dict(ref: str) -> tuple[dict, str | None]:
    """(the raw config.json dict, the local model directory or None) of a model reference."""
    path = Path(str(ref)).expanduser()
    if exists(path):
        config_path = path / "config.json" if path.is_dir() else path
        return _read_json(config_path, "model"), str(path) if path.is_dir() else None
    if str(ref).lower() in _catalog_index():
        return dict(catalog_entry(str(ref))["config"]), None
    raise SpecError("model", f"{ref!r} needs a config: a catalog id, a config.json or a model directory",
                    "a catalog id (specsize models) or a local path")
