/* Option tables: parse "--name VALUE" / "--name=VALUE", check ranges and units in one place. */
#ifndef RTLAB_OPTS_H
#define RTLAB_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "cpulist.h"
#include "probe.h"

struct opt_table {
	const struct opt_desc *opts; /* OPT_END terminated */
	void *base;                  /* the params struct the offsets refer to */
};

/* What a refusal is about, so that `--check` reports facts rather than a parsed message. */
struct opt_fault {
	const char *option; /* canonical name without dashes; NULL: not one option */
	const char *value;  /* as the user gave it; NULL: no value */
};

/* Record in AT (when given) what a refusal is about: OPTION, the canonical name (NULL: not
 * one option), and VALUE as given (NULL: none). Returns -EINVAL, for `return opts_refuse()`. */
int opts_refuse(struct opt_fault *at, const char *option, const char *value);

/* The same, with the one-line reason formatted into ERR. */
int opts_refusef(struct opt_fault *at, const char *option, const char *value, char *err,
		 size_t errlen, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/*
 * Parse ARGV against TABLES, each choice option first set to its default. Arguments that
 * do not start with "--" are positional and collected into POS (at most *NPOS on entry;
 * count on exit). An alias is taken as its option. Returns 0, 1 when --help was asked for, or
 * -EINVAL with a one-line reason in ERR naming the option by its canonical
 * name; AT (if given) then says which option and value were refused.
 */
int opts_parse(int argc, char **argv, const struct opt_table *tables, int ntables,
	       const struct cpulist *online, const char **pos, int *npos, struct opt_fault *at,
	       char *err, size_t errlen);

/* Is ARG (e.g. "--check") literally one of ARGV, wherever it is? */
bool opts_given(int argc, char **argv, const char *arg);

/* Print "  --name METAVAR   help" for every option of TABLES, aliases left out; a choice
 * adds its words and default. */
void opts_help(FILE *f, const struct opt_table *tables, int ntables);

/* JSON description of a table (for `rtlab-probe list --json`), aliases under their option;
 * a choice with its "choices" and "default". */
struct jw;
void opts_json(struct jw *w, const struct opt_desc *opts);

/* One JSON line on F: {"error": MSG, "option": ..., "value": ...} (`--check` refusals). */
void opts_fault_json(FILE *f, const char *msg, const struct opt_fault *at);

#endif
