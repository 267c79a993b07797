/* Option tables: parse "--name VALUE" / "--name=VALUE", check ranges and units in one place. */
#ifndef RTLAB_OPTS_H
#define RTLAB_OPTS_H

#include <stddef.h>
#include <stdio.h>

#include "cpulist.h"
#include "probe.h"

struct opt_table {
	const struct opt_desc *opts; /* OPT_END terminated */
	void *base;                  /* the params struct the offsets refer to */
};

/*
 * Parse ARGV against TABLES. Arguments that do not start with "--" are
 * positional and collected into POS (at most *NPOS on entry; count on exit).
 * Returns 0, 1 when --help was asked for, or -EINVAL with a one-line
 * reason naming the option in err.
 */
int opts_parse(int argc, char **argv, const struct opt_table *tables, int ntables,
	       const struct cpulist *online, const char **pos, int *npos, char *err, size_t errlen);

/* Print "  --name METAVAR   help" for every option of TABLES. */
void opts_help(FILE *f, const struct opt_table *tables, int ntables);

/* JSON description of a table (for `rtlab-probe list --json`). */
struct jw;
void opts_json(struct jw *w, const struct opt_desc *opts);

#endif
