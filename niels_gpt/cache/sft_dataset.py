"""`SFTExampleDataset`: (x, y, y_masked) rows from an SFT cache split, padded or packed (see niels_gpt.sft.dataset)."""

from niels_gpt.sft.dataset import SFTExampleDataset

__all__ = ["SFTExampleDataset"]
