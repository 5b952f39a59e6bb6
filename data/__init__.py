"""Datasets: bundled samples, hub benchmarks and local files, as ``dspy.Example`` lists."""

from netcast.data.records import QADataset
from netcast.data.registry import dataset_names, load_corpus, load_dataset, read_records

__all__ = ["QADataset", "dataset_names", "load_corpus", "load_dataset", "read_records"]
