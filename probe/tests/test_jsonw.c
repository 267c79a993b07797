/* JSON writer: exact output for escaping, UTF-8 handling, nesting and numbers. */
#include "check.h"
#include "lib/jsonw.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static char *mem;
static size_t memlen;

static FILE *open_mem(void)
{
	FILE *f = open_memstream(&mem, &memlen);

	if (!f) {
		perror("open_memstream");
		exit(1);
	}
	return f;
}

/* Close the stream and compare everything written with WANT. */
static void expect(FILE *f, const char *want)
{
	fclose(f);
	CHECK_STR(mem, want);
	free(mem);
	mem = NULL;
}

static void esc(const char *in, const char *want)
{
	FILE *f = open_mem();

	jw_write_escaped(f, in);
	expect(f, want);
}

static void test_escape(void)
{
	char ctl[32];
	int i;

	esc("", "\"\"");
	esc("plain text/ok", "\"plain text/ok\"");
	esc("say \"hi\"", "\"say \\\"hi\\\"\"");
	esc("C:\\tmp\\", "\"C:\\\\tmp\\\\\"");
	esc("a\nb\tc\rd\be\ff", "\"a\\nb\\tc\\rd\\be\\ff\"");
	esc("del\x7f", "\"del\\u007f\"");

	/* every control byte 0x01..0x1f (0x00 ends the C string) */
	for (i = 1; i < 32; i++)
		ctl[i - 1] = (char)i;
	ctl[31] = '\0';
	esc(ctl, "\"\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n\\u000b\\f\\r"
		 "\\u000e\\u000f\\u0010\\u0011\\u0012\\u0013\\u0014\\u0015\\u0016\\u0017"
		 "\\u0018\\u0019\\u001a\\u001b\\u001c\\u001d\\u001e\\u001f\"");

	/* valid UTF-8 passes through: é (2 bytes), € (3), 😀 (4), U+10FFFF, U+FFFD */
	esc("caf\xc3\xa9", "\"caf\xc3\xa9\"");
	esc("5\xe2\x82\xac", "\"5\xe2\x82\xac\"");
	esc("\xf0\x9f\x98\x80!", "\"\xf0\x9f\x98\x80!\"");
	esc("\xf4\x8f\xbf\xbf", "\"\xf4\x8f\xbf\xbf\"");
	esc("\xef\xbf\xbd", "\"\xef\xbf\xbd\"");
	esc("\xed\x9f\xbf", "\"\xed\x9f\xbf\""); /* U+D7FF, just below the surrogates */
	esc("\xc2\x80\xdf\xbf", "\"\xc2\x80\xdf\xbf\"");

	/* each invalid byte becomes one U+FFFD escape */
	esc("a\xff"
	    "b",
	    "\"a\\ufffdb\"");
	esc("\xfe", "\"\\ufffd\"");
	esc("x\xe2\x82", "\"x\\ufffd\\ufffd\"");          /* truncated € at the end */
	esc("\xe2\x82y", "\"\\ufffd\\ufffdy\"");          /* truncated € before ASCII */
	esc("\xf0\x9f\x98", "\"\\ufffd\\ufffd\\ufffd\""); /* truncated 😀 */
	esc("\xc0\xaf", "\"\\ufffd\\ufffd\"");            /* overlong '/' */
	esc("\xc1\xbf", "\"\\ufffd\\ufffd\"");            /* overlong */
	esc("\xe0\x80\xaf", "\"\\ufffd\\ufffd\\ufffd\""); /* overlong 3-byte */
	esc("\xf0\x80\x80\xaf", "\"\\ufffd\\ufffd\\ufffd\\ufffd\""); /* overlong 4-byte */
	esc("\xed\xa0\x80", "\"\\ufffd\\ufffd\\ufffd\"");            /* surrogate U+D800 */
	esc("\xed\xbf\xbf", "\"\\ufffd\\ufffd\\ufffd\"");            /* surrogate U+DFFF */
	esc("\xf4\x90\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\""); /* U+110000 */
	esc("\xf5\x80\x80\x80", "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");
	esc("\x80", "\"\\ufffd\"");                 /* lone continuation */
	esc("\xc3\xa9\xa9", "\"\xc3\xa9\\ufffd\""); /* é then a stray continuation */
	esc("\xc3\"", "\"\\ufffd\\\"\"");           /* lead byte then a quote */
}

static void test_nesting(void)
{
	struct jw w;
	FILE *f = open_mem();

	jw_init(&w, f);
	jw_obj_begin(&w);
	jw_kstr(&w, "name", "probe");
	jw_kint(&w, "n", -3);
	jw_key(&w, "empty_obj");
	jw_obj_begin(&w);
	jw_obj_end(&w);
	jw_key(&w, "empty_arr");
	jw_arr_begin(&w);
	jw_arr_end(&w);
	jw_key(&w, "list");
	jw_arr_begin(&w);
	jw_int(&w, 1);
	jw_arr_begin(&w);
	jw_arr_end(&w);
	jw_obj_begin(&w);
	jw_kbool(&w, "a", true);
	jw_key(&w, "b");
	jw_arr_begin(&w);
	jw_null(&w);
	jw_bool(&w, false);
	jw_str(&w, "x\"y");
	jw_arr_end(&w);
	jw_obj_end(&w);
	jw_uint(&w, UINT64_MAX);
	jw_arr_end(&w);
	jw_kuint(&w, "u", 7);
	jw_kdouble(&w, "d", 0.5);
	jw_key(&w, "k\n");
	jw_str(&w, NULL);
	jw_obj_end(&w);
	CHECK_INT(w.depth, 0);
	expect(f, "{\"name\":\"probe\",\"n\":-3,\"empty_obj\":{},\"empty_arr\":[],"
		  "\"list\":[1,[],{\"a\":true,\"b\":[null,false,\"x\\\"y\"]},18446744073709551615],"
		  "\"u\":7,\"d\":0.5,\"k\\n\":null}");

	/* a top-level array of objects */
	f = open_mem();
	jw_init(&w, f);
	jw_arr_begin(&w);
	for (int i = 0; i < 3; i++) {
		jw_obj_begin(&w);
		jw_kint(&w, "i", i);
		jw_kint(&w, "min", INT64_MIN);
		jw_obj_end(&w);
	}
	jw_arr_end(&w);
	expect(f, "[{\"i\":0,\"min\":-9223372036854775808},{\"i\":1,\"min\":-9223372036854775808},"
		  "{\"i\":2,\"min\":-9223372036854775808}]");

	/* deep nesting keeps commas right at every level: [0,[1,...[30],9]...,9] */
	char want[512] = "";
	size_t n = 0;

	f = open_mem();
	jw_init(&w, f);
	for (int i = 0; i < JW_MAX_DEPTH - 1; i++) {
		jw_arr_begin(&w);
		jw_int(&w, i);
		n += (size_t)snprintf(want + n, sizeof(want) - n, "%s[%d", i ? "," : "", i);
	}
	for (int i = 0; i < JW_MAX_DEPTH - 1; i++) {
		jw_arr_end(&w);
		n += (size_t)snprintf(want + n, sizeof(want) - n, "]");
		if (i < JW_MAX_DEPTH - 2) {
			jw_int(&w, 9);
			n += (size_t)snprintf(want + n, sizeof(want) - n, ",9");
		}
	}
	CHECK_INT(w.depth, 0);
	expect(f, want);
}

static void dbl(double v, const char *want)
{
	struct jw w;
	FILE *f = open_mem();

	jw_init(&w, f);
	jw_double(&w, v);
	expect(f, want);
}

static void test_doubles(void)
{
	dbl(0.0, "0");
	dbl(-0.0, "-0");
	dbl(1.0, "1");
	dbl(0.5, "0.5");
	dbl(-2.25, "-2.25");
	dbl(0.1, "0.1");
	dbl(1.0 / 3.0, "0.3333333333333333");
	dbl(0.1 + 0.2, "0.30000000000000004");
	dbl(123456.789, "123456.789");
	dbl(1e21, "1e+21");
	dbl(1.5e-7, "1.5e-07");
	dbl(5e-324, "4.94065645841247e-324"); /* subnormal: %.15g already reads back */
	dbl(1.7976931348623157e308, "1.7976931348623157e+308");
	dbl(NAN, "null");
	dbl(INFINITY, "null");
	dbl(-INFINITY, "null");

	/* round trip: the shortest form still reads back to the same double */
	int same = 1, shortest = 1;

	for (int i = 1; i < 2000; i++) {
		double v = 1.0 / i * (i % 7 ? 1e-3 : 1e9);
		struct jw w;
		FILE *f = open_mem();

		jw_init(&w, f);
		jw_double(&w, v);
		fclose(f);
		if (strtod(mem, NULL) != v)
			same = 0;
		/* never longer than %.17g, so never a spurious ...0000001 tail */
		if (strlen(mem) > 24)
			shortest = 0;
		free(mem);
		mem = NULL;
	}
	CHECK(same);
	CHECK(shortest);
}

int main(void)
{
	test_escape();
	test_nesting();
	test_doubles();
	return check_report("test_jsonw");
}
