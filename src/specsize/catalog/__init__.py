"""Catalogs (data files) and the loaders that turn files into core specs. The only layer that reads model files."""

from .gpus import all_gpus, gpu_ids, load_gpu
from .models import catalog_entry, catalog_ids, load_model, load_target

__all__ = ["all_gpus", "gpu_ids", "load_gpu", "catalog_entry", "catalog_ids", "load_model", "load_target"]
