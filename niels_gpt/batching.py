"""Mixed-source byte batches for byte-level training (implemented in `niels_gpt.streams.batches`).

from niels_gpt.batching import StreamBatcher, get_batch, load_stream_cache
"""

from niels_gpt.streams.batches import (
    BytesSources,
    ByteStream,
    StreamBatcher,
    default_p_train,
    get_batch,
    load_stream_cache,
)

__all__ = ["ByteStream", "BytesSources", "StreamBatcher", "default_p_train", "get_batch", "load_stream_cache"]
