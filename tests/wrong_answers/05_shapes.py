"""Known-wrong answers for 05_shapes: the anti-pattern kept in some subtle form.

WRONG[grade_id] = [(answer cell source, a phrase of the feedback specific to the mistake,
                    the idea whose course section the feedback must point to), ...]
"""

WRONG = {
    "positive_mean": [
        ('''
def positive_mean(x):
    positives = x[jnp.where(x > 0)]  # integer indices, but still a data-dependent length
    return jnp.sum(positives) / jnp.maximum(positives.size, 1)
''', "positive_mean asked for a shape that depends on the values", "dynamic_shapes"),
        ('''
def positive_mean(x):
    return jnp.mean(jnp.where(x > 0, x, 0.0))  # divides by every entry, not by the positives
''', "It divides by the number of all entries", "shapes"),
        ('''
def positive_mean(x):
    mask = x > 0
    return jnp.sum(jnp.where(mask, x, 0.0)) / jnp.sum(mask)  # 0 / 0 when nothing is positive
''', "on an input with no positive entry returned nan", "shapes"),
        ('''
def positive_mean(x):
    idx = jnp.nonzero(x.ravel() > 0, size=x.size)[0]  # pads with index 0, a real entry
    return jnp.mean(x.ravel()[idx])
''', "It averages the padding too: `jnp.nonzero(..., size=...)` pads with index 0", "shapes"),
    ],
    "masked_sequence_sum": [
        ('''
def masked_sequence_sum(tokens, lengths):
    return jnp.stack([jnp.sum(tokens[i, :int(lengths[i])]) for i in range(tokens.shape[0])])
''', "masked_sequence_sum asked for a shape that depends on the values", "dynamic_shapes"),
        ('''
def masked_sequence_sum(tokens, lengths):
    mask = jnp.arange(tokens.shape[1])[None, :] <= lengths[:, None]  # one entry too many
    return jnp.sum(jnp.where(mask, tokens, 0.0), axis=1)
''', "It also sums position lengths[i], the first padding entry", "shapes"),
        ('''
def masked_sequence_sum(tokens, lengths):
    return jnp.sum(tokens, axis=1)  # assumes the padding is zero
''', "It sums the padding too", "shapes"),
        ('''
def masked_sequence_sum(tokens, lengths):
    sums = jnp.cumsum(tokens, axis=1)
    return sums[jnp.arange(tokens.shape[0]), lengths - 1]  # a length of 0 reads index -1
''', "A row of length 0 must sum to 0", "shapes"),
        ('''
def masked_sequence_sum(tokens, lengths):
    weights = jnp.where(jnp.arange(tokens.shape[1])[None, :] < lengths[:, None], 1.0, 0.0)
    return jnp.sum(tokens * weights, axis=1)  # nan * 0 is nan: the padding leaks in
''', 'The padding held nan or inf, and it reached the result', 'shapes'),
    ],
    "first_k_positive": [
        ('''
def first_k_positive(x, k):
    idx = jnp.nonzero(x > 0)[0]  # data-dependent length, padded afterwards
    return jnp.concatenate([idx, -jnp.ones(k, idx.dtype)])[:k]
''', "first_k_positive asked for a shape that depends on the values", "dynamic_shapes"),
        ('''
def first_k_positive(x, k):
    return jnp.nonzero(x > 0, size=k)[0]  # pads with 0, a valid index, instead of -1
''', "It pads with 0 where there are fewer than k positive entries", "dynamic_shapes"),
        ('''
def first_k_positive(x, k):
    return jnp.nonzero(x >= 0, size=k, fill_value=-1)[0]  # counts zeros as positive
''', "It counts zeros as positive", "dynamic_shapes"),
        ('''
def first_k_positive(x, k):
    return jnp.where(x > 0, jnp.arange(x.shape[0]), -1)  # a fixed shape, but x's length, not k
''', "returns shape(s) [(5,)], expected one array of shape (2,)", "shapes"),
    ],
    "bucket_length": [
        ('''
def bucket_length(n):
    return 1 << (n - 1).bit_length()  # next power of two: too many small buckets
''', "bucket_length(1), the smallest bucket that holds 1, is 1, expected 16", "bucketing"),
        ('''
def bucket_length(n):
    return min(b for b in BUCKETS if b > n)  # a full bucket is skipped
''', "bucket_length(16), the smallest bucket that holds 16, is 32, expected 16", "bucketing"),
        ('''
def bucket_length(n):
    return max(16, n)  # only short sequences are bucketed
''', "bucket_length(17), the smallest bucket that holds 17, is 17, expected 32", "bucketing"),
        ('''
def bucket_length(n):
    return BUCKETS[-1]  # holds every n in one compile, but pads a 1-token sequence to 256
''', "It holds 1 but is not the smallest bucket that does", "bucketing"),
    ],
    "segment_mean": [
        ("""
def segment_mean(values, segment_ids, num_segments):
    means = []
    for s in range(num_segments):
        idx = jnp.flatnonzero(segment_ids == s)  # as many indices as the segment has entries
        means.append(jnp.where(idx.size > 0, jnp.mean(values[idx]), 0.0))
    return jnp.stack(means)
""", "asked for a shape that depends on the values of its inputs", "dynamic_shapes"),
        ("""
def segment_mean(values, segment_ids, num_segments):
    sums = jax.ops.segment_sum(values, segment_ids, num_segments=num_segments)
    counts = jax.ops.segment_sum(jnp.ones_like(values), segment_ids, num_segments=num_segments)
    return sums / counts  # 0 / 0 for an empty segment
""", "has no entry, so its mean must be 0.0", "shapes"),
        ("""
def segment_mean(values, segment_ids, num_segments):
    means = []
    for s in range(num_segments):
        idx = jnp.nonzero(segment_ids == s, size=values.shape[0], fill_value=0)[0]
        count = jnp.sum(segment_ids == s)
        # the padding indices point at entry 0, a real value, and are averaged in
        means.append(jnp.where(count > 0, jnp.mean(values[idx]), 0.0))
    return jnp.stack(means)
""", "It averages in entries that are not in the segment", "shapes"),
        ("""
def segment_mean(values, segment_ids, num_segments):
    member = segment_ids[:, None] == jnp.arange(num_segments)
    sums = jnp.sum(jnp.where(member, values[:, None], 0.0), axis=0)
    return sums / values.shape[0]  # every segment divided by all n values
""", "divides each segment's sum by the number of all values", "shapes"),
    ],
}

WRONG["window_range"] = [
    ('''
def window_range(x, width):
    # right values, but a Python loop over the positions: one slice per position in the program
    return jnp.stack([jnp.max(x[i:i + width]) - jnp.min(x[i:i + width]) for i in range(x.shape[0] - width + 1)])
''', "the program of window_range grows with the length of x", "loops"),
    ('''
def window_range(x, width):
    def one(_, start):
        window = jax.lax.dynamic_slice(x, (start,), (width - 1,))  # one entry short
        return None, jnp.max(window) - jnp.min(window)

    return jax.lax.scan(one, None, jnp.arange(x.shape[0] - width + 1))[1]
''', "Its windows are one entry short", "shapes"),
    ('''
def window_range(x, width):
    def one(_, start):
        window = jax.lax.dynamic_slice(x, (start,), (width,))
        return None, jnp.max(window) - jnp.mean(window)  # max - mean: not the range

    return jax.lax.scan(one, None, jnp.arange(x.shape[0] - width + 1))[1]
''', "on random input #1 of length 16", "shapes"),
]
