"""Known-wrong answers for 05_shapes: the anti-pattern kept in some subtle form.

WRONG[grade_id] = [(answer cell source, a phrase the feedback must contain), ...]
"""

WRONG = {
    "positive_mean": [
        ('''
def positive_mean(x):
    positives = x[jnp.where(x > 0)]  # integer indices, but still a data-dependent length
    return jnp.sum(positives) / jnp.maximum(positives.size, 1)
''', "depends on the values"),
        ('''
def positive_mean(x):
    return jnp.mean(jnp.where(x > 0, x, 0.0))  # divides by every entry, not by the positives
''', "is wrong"),
        ('''
def positive_mean(x):
    mask = x > 0
    return jnp.sum(jnp.where(mask, x, 0.0)) / jnp.sum(mask)  # 0 / 0 when nothing is positive
''', "expected 0.0"),
        ('''
def positive_mean(x):
    idx = jnp.nonzero(x.ravel() > 0, size=x.size)[0]  # pads with index 0, a real entry
    return jnp.mean(x.ravel()[idx])
''', "is wrong"),
    ],
    "masked_sequence_sum": [
        ('''
def masked_sequence_sum(tokens, lengths):
    return jnp.stack([jnp.sum(tokens[i, :int(lengths[i])]) for i in range(tokens.shape[0])])
''', "depends on the values"),
        ('''
def masked_sequence_sum(tokens, lengths):
    mask = jnp.arange(tokens.shape[1])[None, :] <= lengths[:, None]  # one entry too many
    return jnp.sum(jnp.where(mask, tokens, 0.0), axis=1)
''', "is wrong"),
        ('''
def masked_sequence_sum(tokens, lengths):
    return jnp.sum(tokens, axis=1)  # assumes the padding is zero
''', "is wrong"),
        ('''
def masked_sequence_sum(tokens, lengths):
    sums = jnp.cumsum(tokens, axis=1)
    return sums[jnp.arange(tokens.shape[0]), lengths - 1]  # a length of 0 reads index -1
''', "is wrong"),
    ],
    "first_k_positive": [
        ('''
def first_k_positive(x, k):
    idx = jnp.nonzero(x > 0)[0]  # data-dependent length, padded afterwards
    return jnp.concatenate([idx, -jnp.ones(k, idx.dtype)])[:k]
''', "depends on the values"),
        ('''
def first_k_positive(x, k):
    return jnp.nonzero(x > 0, size=k)[0]  # pads with 0, a valid index, instead of -1
''', "is wrong"),
        ('''
def first_k_positive(x, k):
    return jnp.nonzero(x >= 0, size=k, fill_value=-1)[0]  # counts zeros as positive
''', "is wrong"),
    ],
    "bucket_length": [
        ('''
def bucket_length(n):
    return 1 << (n - 1).bit_length()  # next power of two: too many small buckets
''', "expected"),
        ('''
def bucket_length(n):
    return min(b for b in BUCKETS if b > n)  # a full bucket is skipped
''', "expected"),
        ('''
def bucket_length(n):
    return max(16, n)  # only short sequences are bucketed
''', "expected"),
    ],
}
