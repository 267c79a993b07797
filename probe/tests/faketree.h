/* Files of a fake tree (a directory standing in for tracefs) for the unit tests:
 * put() writes one whole, get() reads one whole. The test sets ROOT first. */
#ifndef RTLAB_FAKETREE_H
#define RTLAB_FAKETREE_H

#include <limits.h>
#include <stdio.h>

static char root[200];

static void put(const char *rel, const char *text)
{
	char path[PATH_MAX + 64];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	if ((f = fopen(path, "w"))) {
		fputs(text, f);
		fclose(f);
	}
}

static const char *get(const char *rel)
{
	static char buf[4096];
	char path[PATH_MAX + 64];
	size_t n = 0;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", root, rel);
	if ((f = fopen(path, "r"))) {
		n = fread(buf, 1, sizeof(buf) - 1, f);
		fclose(f);
	}
	buf[n] = '\0';
	return buf;
}

#endif
