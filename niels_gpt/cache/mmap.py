"""The memory-map opener under its public name: `open_tokens(path)` maps a uint16 token file read-only
(re-exported from `niels_gpt.token_files`); slicing the map reads only the pages it touches."""

from niels_gpt.token_files import open_tokens

__all__ = ["open_tokens"]
