/* Streaming JSON writer: compact output, commas tracked per nesting level. */
#include "jsonw.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* first[] slot for DEPTH; nesting past JW_MAX_DEPTH shares the last slot */
static bool *first_slot(struct jw *w)
{
	int d = w->depth < JW_MAX_DEPTH ? w->depth : JW_MAX_DEPTH - 1;

	return &w->first[d < 0 ? 0 : d];
}

/* Emit the separator a new element needs at the current level. */
static void jw_sep(struct jw *w)
{
	bool *first = first_slot(w);

	if (w->after_key) {
		w->after_key = false;
		return;
	}
	if (!*first)
		fputc(',', w->f);
	*first = false;
}

void jw_init(struct jw *w, FILE *f)
{
	memset(w, 0, sizeof(*w));
	w->f = f;
	w->first[0] = true;
}

static void jw_open(struct jw *w, char c)
{
	jw_sep(w);
	fputc(c, w->f);
	w->depth++;
	*first_slot(w) = true;
}

static void jw_close(struct jw *w, char c)
{
	if (w->depth > 0)
		w->depth--;
	w->after_key = false;
	fputc(c, w->f);
}

void jw_obj_begin(struct jw *w)
{
	jw_open(w, '{');
}
void jw_obj_end(struct jw *w)
{
	jw_close(w, '}');
}
void jw_arr_begin(struct jw *w)
{
	jw_open(w, '[');
}
void jw_arr_end(struct jw *w)
{
	jw_close(w, ']');
}

void jw_key(struct jw *w, const char *key)
{
	jw_sep(w);
	jw_write_escaped(w->f, key ? key : "");
	fputc(':', w->f);
	w->after_key = true;
}

void jw_str(struct jw *w, const char *s)
{
	jw_sep(w);
	jw_write_escaped(w->f, s); /* NULL becomes null */
}

void jw_int(struct jw *w, int64_t v)
{
	jw_sep(w);
	fprintf(w->f, "%" PRId64, v);
}

void jw_uint(struct jw *w, uint64_t v)
{
	jw_sep(w);
	fprintf(w->f, "%" PRIu64, v);
}

void jw_double(struct jw *w, double v)
{
	char buf[40];
	int prec;

	jw_sep(w);
	if (!isfinite(v)) {
		fputs("null", w->f);
		return;
	}
	/* shortest of %.15g..%.17g that reads back to the same bits */
	for (prec = 15; prec <= 17; prec++) {
		snprintf(buf, sizeof(buf), "%.*g", prec, v);
		if (strtod(buf, NULL) == v)
			break;
	}
	/* a caller's LC_NUMERIC may have turned the decimal point into a comma */
	for (char *p = buf; *p; p++)
		if (*p == ',')
			*p = '.';
	fputs(buf, w->f);
}

void jw_bool(struct jw *w, bool v)
{
	jw_sep(w);
	fputs(v ? "true" : "false", w->f);
}

void jw_null(struct jw *w)
{
	jw_sep(w);
	fputs("null", w->f);
}

void jw_kstr(struct jw *w, const char *key, const char *s)
{
	jw_key(w, key);
	jw_str(w, s);
}
void jw_kint(struct jw *w, const char *key, int64_t v)
{
	jw_key(w, key);
	jw_int(w, v);
}
void jw_kuint(struct jw *w, const char *key, uint64_t v)
{
	jw_key(w, key);
	jw_uint(w, v);
}
void jw_kdouble(struct jw *w, const char *key, double v)
{
	jw_key(w, key);
	jw_double(w, v);
}
void jw_kbool(struct jw *w, const char *key, bool v)
{
	jw_key(w, key);
	jw_bool(w, v);
}

/*
 * Length of the valid UTF-8 sequence starting at S (2..4), or 0 if S[0] does
 * not start one. Overlongs, surrogates and code points > U+10FFFF are invalid.
 */
static size_t utf8_len(const unsigned char *s)
{
	unsigned char c = s[0], lo = 0x80, hi = 0xbf;
	size_t n, i;

	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;
	/* the second byte's range is what rules out overlongs and surrogates */
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (s[1] < lo || s[1] > hi)
		return 0;
	/* a NUL terminator fails this test, so we never read past the string */
	for (i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return n;
}

void jw_write_escaped(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	const unsigned char *run = s; /* start of bytes that pass through unchanged */
	size_t n;

	if (!str) {
		fputs("null", f);
		return;
	}
	fputc('"', f);
	while (*s) {
		unsigned char c = *s;
		const char *esc = NULL;
		char hex[8];

		if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
			s++;
			continue;
		}
		if (c >= 0x80 && (n = utf8_len(s)) > 0) {
			s += n;
			continue;
		}
		switch (c) {
		case '"':
			esc = "\\\"";
			break;
		case '\\':
			esc = "\\\\";
			break;
		case '\n':
			esc = "\\n";
			break;
		case '\t':
			esc = "\\t";
			break;
		case '\r':
			esc = "\\r";
			break;
		case '\b':
			esc = "\\b";
			break;
		case '\f':
			esc = "\\f";
			break;
		default:
			if (c >= 0x80) {
				esc = "\\ufffd";
			} else {
				snprintf(hex, sizeof(hex), "\\u%04x", c);
				esc = hex;
			}
		}
		fwrite(run, 1, (size_t)(s - run), f);
		fputs(esc, f);
		run = ++s;
	}
	fwrite(run, 1, (size_t)(s - run), f);
	fputc('"', f);
}
