"""What a training script uses at training time beyond one dataset: the mixed, resumable loader.

loader.py (`MixedLoader`: several caches mixed by weight or by a schedule (schedule.py), random or epoch
mode, exact resume, rank sharding; public as `niels_gpt.cache.loader`); its epoch mode is built from
epoch_order.py (a seeded O(1)-memory permutation per epoch and one rank's slice of it), round_robin.py (rows
to sources, every count within 1 of its share) and epoch_mixer.py (both, per source, with their saved state
and the ledger of ledger.py: a digest of every batch's reads, checked on resume; history.py answers what a
step read and when an item was read); assembly.py reads a batch's rows in one pass; plan.py holds the
fingerprint a resumed loader checks, sources.py what a loader's sources must share.
attention.py: `block_causal_mask`, the attention mask of packed SFT rows (one example per block).
For torch.utils.data: batch_dict.py (dict batches: input_ids, unshifted labels, shift_labels, position_ids,
segment_ids), torch_data.py (map-style datasets over every cache), samplers.py (EpochSampler: seeded epochs,
ranks, resumable), mixture.py (MixedBatches: MixedLoader's batches as an IterableDataset, the same for any
number of workers), loader_state.py (torchdata StatefulDataLoader states: refusing another num_workers).
For the training step: loss.py (`masked_cross_entropy`, the project's loss), hf.py (`hf_inputs`: a dict
batch as a transformers causal LM takes it, packed rows included), prefetch.py (`prefetch`: a background
thread keeps the next batches ready, on CUDA on its own stream).
"""
