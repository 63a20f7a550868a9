"""Source loaders: every corpus as PretrainSample / ChatSample iterators."""
