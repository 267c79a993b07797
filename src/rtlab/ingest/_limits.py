"""What an import accepts: bounds that real runs stay far inside.

They keep a hostile file from exhausting memory and keep every number of the
document, and every later computation on it, within int64 (and counts exact in float64).
"""

MAX_FILE_BYTES = 256 << 20
# Non-empty histogram buckets over all threads: a -N run on 64 CPUs with 30000
# distinct ns values per thread has 2M; each costs a few hundred bytes in memory.
MAX_BUCKETS = 1 << 22
INT64_MAX = (1 << 63) - 1
INT32_LIMIT = 1 << 31  # thread numbers, cpus, buckets and options are C ints in cyclictest
MAX_LATENCY_NS = 1 << 62  # exclusive bound of |min|, |max|, |avg|: max - min fits int64
MAX_SAMPLES = 1 << 53  # over all threads: sums fit int64, counts are exact as floats
# JSON values of an imported document: a probe document of a week-long run of four threads
# (per-second series) has 10M; json.loads spends 30 to 60 bytes on each.
MAX_JSON_VALUES = 1 << 24
