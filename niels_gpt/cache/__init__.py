"""Token-id caches on disk (uint16 shards, SFT tokens + offsets) and the datasets that read them."""
