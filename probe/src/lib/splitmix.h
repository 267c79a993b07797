/* SplitMix64 (Steele, Lea, Flood 2014; Vigna's splitmix64.c): a fast, seedable generator of
 * 64-bit values for workloads and seeds, not for anything that needs to be unpredictable. */
#ifndef RTLAB_SPLITMIX_H
#define RTLAB_SPLITMIX_H

#include <stdint.h>

/* The next value of the sequence whose state is *S (any value is a valid seed). */
static inline uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

#endif
