/* Minimal streaming JSON writer. Every string is escaped: quotes, backslash,
 * control bytes as \u00XX, valid UTF-8 passed through, invalid bytes as U+FFFD. */
#ifndef RTLAB_JSONW_H
#define RTLAB_JSONW_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define JW_MAX_DEPTH 32

struct jw {
	FILE *f;
	int depth;
	bool first[JW_MAX_DEPTH]; /* no element written yet at this depth */
	bool after_key;           /* a key was written; the value follows */
};

void jw_init(struct jw *w, FILE *f);
void jw_obj_begin(struct jw *w);
void jw_obj_end(struct jw *w);
void jw_arr_begin(struct jw *w);
void jw_arr_end(struct jw *w);
void jw_key(struct jw *w, const char *key);
void jw_str(struct jw *w, const char *s);
void jw_int(struct jw *w, int64_t v);
void jw_uint(struct jw *w, uint64_t v);
void jw_double(struct jw *w, double v); /* NaN and infinities become null */
void jw_bool(struct jw *w, bool v);
void jw_null(struct jw *w);

/* key + value shorthands */
void jw_kstr(struct jw *w, const char *key, const char *s);
void jw_kint(struct jw *w, const char *key, int64_t v);
void jw_kuint(struct jw *w, const char *key, uint64_t v);
void jw_kdouble(struct jw *w, const char *key, double v);
void jw_kbool(struct jw *w, const char *key, bool v);

/* Write S as a JSON string literal (with quotes) to F. */
void jw_write_escaped(FILE *f, const char *s);

#endif
