#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "jsonw.h"
#include "loadrun.h"
#include "opts.h"
#include "policy.h"
#include "timeutil.h"

static const char *const type_names[] = {
	[OPT_FLAG] = "flag",       [OPT_INT] = "int",       [OPT_DURATION] = "duration",
	[OPT_CPULIST] = "cpulist", [OPT_POLICY] = "policy", [OPT_STRING] = "string",
	[OPT_LOAD] = "load",       [OPT_CHOICE] = "choice",
};

static const struct opt_desc *lookup(const struct opt_desc *opts, const char *name, size_t len)
{
	for (const struct opt_desc *o = opts; o->name; o++)
		if (strlen(o->name) == len && !strncmp(o->name, name, len))
			return o;
	return NULL;
}

/* The canonical option NAME (an alias resolved), and the params struct it fills. */
static const struct opt_desc *find_opt(const struct opt_table *tables, int ntables,
				       const char *name, size_t len, void **base)
{
	for (int t = 0; t < ntables; t++) {
		const struct opt_desc *o = lookup(tables[t].opts, name, len);

		if (o && o->alias_of)
			o = lookup(tables[t].opts, o->alias_of, strlen(o->alias_of));
		if (o && !o->alias_of) {
			*base = tables[t].base;
			return o;
		}
	}
	return NULL;
}

/* A duration as the user would type it, exactly: in the largest unit that divides it. */
static void format_exact_ns(int64_t ns, char *buf, size_t len)
{
	static const struct {
		const char *name;
		int64_t mult;
	} units[] = {
		{ "d", 86400 * NSEC_PER_SEC }, { "h", 3600 * NSEC_PER_SEC },
		{ "m", 60 * NSEC_PER_SEC },    { "s", NSEC_PER_SEC },
		{ "ms", NSEC_PER_MSEC },       { "us", NSEC_PER_USEC },
	};

	for (size_t i = 0; ns && i < sizeof(units) / sizeof(units[0]); i++) {
		if (ns % units[i].mult == 0) {
			snprintf(buf, len, "%" PRId64 "%s", ns / units[i].mult, units[i].name);
			return;
		}
	}
	snprintf(buf, len, "%" PRId64 "ns", ns);
}

static void format_value(const struct opt_desc *o, int64_t v, char *buf, size_t len)
{
	if (o->type == OPT_DURATION)
		format_exact_ns(v, buf, len);
	else
		snprintf(buf, len, "%" PRId64, v);
}

static void range_error(const struct opt_desc *o, const char *val, char *err, size_t errlen)
{
	char lo[32], hi[32];

	format_value(o, o->min, lo, sizeof(lo));
	format_value(o, o->max, hi, sizeof(hi));
	snprintf(err, errlen, "--%s: \"%s\" is out of range (%s..%s%s%s)", o->name, val, lo, hi,
		 o->type == OPT_INT && o->metavar ? " " : "",
		 o->type == OPT_INT && o->metavar ? o->metavar : "");
}

/* Range and step of an int or duration V; 0 or -EINVAL with the reason in ERR. */
static int check_number(const struct opt_desc *o, const char *val, int64_t v, char *err,
			size_t errlen)
{
	char step[32];

	if (v < o->min || v > o->max) {
		range_error(o, val, err, errlen);
		return -EINVAL;
	}
	if (o->step > 1 && v % o->step) {
		format_value(o, o->step, step, sizeof(step));
		snprintf(err, errlen, "--%s: \"%s\" is not a multiple of %s", o->name, val, step);
		return -EINVAL;
	}
	return 0;
}

/* The words of choice O as "a, b, c" in BUF (cut short, never overrun). */
static void choice_words(const struct opt_desc *o, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int i = 0; o->choices[i] && n < len; i++)
		n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? ", " : "", o->choices[i]);
}

/* The index of VAL among the words of choice O; -EINVAL with the words in ERR. */
static int choice_index(const struct opt_desc *o, const char *val, char *err, size_t errlen)
{
	char words[400];

	for (int i = 0; o->choices[i]; i++)
		if (!strcmp(o->choices[i], val))
			return i;
	choice_words(o, words, sizeof(words));
	snprintf(err, errlen, "--%s: must be one of %s; not '%s'", o->name, words, val);
	return -EINVAL;
}

static int set_value(const struct opt_desc *o, void *base, const char *val,
		     const struct cpulist *online, char *err, size_t errlen)
{
	char *field = (char *)base + o->offset;
	char why[256];
	int64_t v;
	int i;

	switch (o->type) {
	case OPT_FLAG:
		*(bool *)field = true;
		return 0;
	case OPT_INT:
		if (parse_int64(val, &v)) {
			snprintf(err, errlen, "--%s: \"%s\" is not a whole number", o->name, val);
			return -EINVAL;
		}
		if (check_number(o, val, v, err, errlen))
			return -EINVAL;
		*(int64_t *)field = v;
		return 0;
	case OPT_DURATION:
		if (parse_duration_ns(val, &v, why, sizeof(why)))
			goto out_why;
		if (check_number(o, val, v, err, errlen))
			return -EINVAL;
		*(int64_t *)field = v;
		return 0;
	case OPT_CPULIST:
		if (cpulist_parse(val, (struct cpulist *)field, why, sizeof(why)) ||
		    cpulist_check_subset((struct cpulist *)field, online, why, sizeof(why)))
			goto out_why;
		if (o->max > 0 && ((struct cpulist *)field)->n > o->max) {
			if (o->max == 1)
				snprintf(err, errlen, "--%s: \"%s\" is not one CPU", o->name, val);
			else
				snprintf(err, errlen, "--%s: \"%s\" is more than %lld CPUs",
					 o->name, val, (long long)o->max);
			return -EINVAL;
		}
		return 0;
	case OPT_POLICY:
		if (policy_parse(val, (struct policy_spec *)field, why, sizeof(why)))
			goto out_why;
		return 0;
	case OPT_STRING:
		if (!*val) {
			snprintf(err, errlen, "--%s: empty value", o->name);
			return -EINVAL;
		}
		*(const char **)field = val;
		return 0;
	case OPT_LOAD: {
		struct load_list *l = (struct load_list *)field;

		if (l->n >= LOAD_MAX_SPECS) {
			snprintf(err, errlen, "--%s: at most %d loads", o->name, LOAD_MAX_SPECS);
			return -EINVAL;
		}
		if (load_spec_parse(val, online, &l->spec[l->n], why, sizeof(why)))
			goto out_why;
		l->n++;
		return 0;
	}
	case OPT_CHOICE:
		if ((i = choice_index(o, val, err, errlen)) < 0)
			return i;
		*(int *)field = i;
		return 0;
	}
	return -EINVAL;
out_why:
	snprintf(err, errlen, "--%s: %s", o->name, why);
	return -EINVAL;
}

int opts_refuse(struct opt_fault *at, const char *option, const char *value)
{
	if (at) {
		at->option = option;
		at->value = value;
	}
	return -EINVAL;
}

int opts_refusef(struct opt_fault *at, const char *option, const char *value, char *err,
		 size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return opts_refuse(at, option, value);
}

/* Every choice option of TABLES takes its default: the table is its one source. */
static void choice_defaults(const struct opt_table *tables, int ntables)
{
	for (int t = 0; t < ntables; t++)
		for (const struct opt_desc *o = tables[t].opts; o->name; o++)
			if (o->type == OPT_CHOICE && !o->alias_of)
				*(int *)((char *)tables[t].base + o->offset) = o->choice_default;
}

int opts_parse(int argc, char **argv, const struct opt_table *tables, int ntables,
	       const struct cpulist *online, const char **pos, int *npos, struct opt_fault *at,
	       char *err, size_t errlen)
{
	int maxpos = *npos;

	*npos = 0;
	choice_defaults(tables, ntables);
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "-h") || !strcmp(a, "--help"))
			return 1;
		if (strncmp(a, "--", 2) || !a[2]) {
			if (*npos >= maxpos) {
				snprintf(err, errlen, "unexpected argument \"%s\"", a);
				return opts_refuse(at, NULL, a);
			}
			pos[(*npos)++] = a;
			continue;
		}
		const char *name = a + 2, *eq = strchr(name, '=');
		size_t len = eq ? (size_t)(eq - name) : strlen(name);
		void *base;
		const struct opt_desc *o = find_opt(tables, ntables, name, len, &base);

		if (!o) {
			snprintf(err, errlen, "unknown option \"--%.*s\" (see --help)", (int)len,
				 name);
			return opts_refuse(at, NULL, a);
		}
		const char *val = NULL;

		if (o->type == OPT_FLAG) {
			if (eq) {
				snprintf(err, errlen, "--%s takes no value", o->name);
				return opts_refuse(at, o->name, eq + 1);
			}
		} else if (eq) {
			val = eq + 1;
		} else if (i + 1 < argc) {
			val = argv[++i];
		} else {
			snprintf(err, errlen, "--%s needs a value (%s)", o->name, o->metavar);
			return opts_refuse(at, o->name, NULL);
		}
		if (set_value(o, base, val, online, err, errlen))
			return opts_refuse(at, o->name, val);
		if (o->set_offset != OPT_NO_SET)
			*(bool *)((char *)base + o->set_offset) = true;
	}
	return 0;
}

bool opts_given(int argc, char **argv, const char *arg)
{
	for (int i = 0; i < argc; i++)
		if (!strcmp(argv[i], arg))
			return true;
	return false;
}

void opts_help(FILE *f, const struct opt_table *tables, int ntables)
{
	for (int t = 0; t < ntables; t++) {
		for (const struct opt_desc *o = tables[t].opts; o->name; o++) {
			char head[64], words[400];

			if (o->alias_of)
				continue; /* old spellings keep working without cluttering the help */
			snprintf(head, sizeof(head), "--%s%s%s", o->name, o->metavar ? " " : "",
				 o->metavar ? o->metavar : "");
			fprintf(f, "  %-24s %s", head, o->help);
			if (o->type == OPT_CHOICE) {
				choice_words(o, words, sizeof(words));
				fprintf(f, " (%s; default %s)", words,
					o->choices[o->choice_default]);
			}
			fputc('\n', f);
		}
	}
}

void opts_json(struct jw *w, const struct opt_desc *opts)
{
	bool ns;

	jw_arr_begin(w);
	for (const struct opt_desc *o = opts; o->name; o++) {
		if (o->alias_of)
			continue;
		ns = o->type == OPT_DURATION;
		jw_obj_begin(w);
		jw_kstr(w, "name", o->name);
		jw_kstr(w, "type", type_names[o->type]);
		jw_kstr(w, "metavar", o->metavar); /* NULL (a flag) becomes null */
		if (o->type == OPT_INT || ns) {
			jw_kint(w, ns ? "min_ns" : "min", o->min);
			jw_kint(w, ns ? "max_ns" : "max", o->max);
			if (o->step > 1)
				jw_kint(w, ns ? "step_ns" : "step", o->step);
		}
		if (o->type == OPT_CHOICE) {
			jw_key(w, "choices");
			jw_arr_begin(w);
			for (int i = 0; o->choices[i]; i++)
				jw_str(w, o->choices[i]);
			jw_arr_end(w);
			jw_kstr(w, "default", o->choices[o->choice_default]);
		}
		jw_kstr(w, "help", o->help);
		jw_key(w, "aliases");
		jw_arr_begin(w);
		for (const struct opt_desc *a = opts; a->name; a++)
			if (a->alias_of && !strcmp(a->alias_of, o->name))
				jw_str(w, a->name);
		jw_arr_end(w);
		jw_obj_end(w);
	}
	jw_arr_end(w);
}

void opts_fault_json(FILE *f, const char *msg, const struct opt_fault *at)
{
	struct jw w;

	jw_init(&w, f);
	jw_obj_begin(&w);
	jw_kstr(&w, "error", msg);
	jw_kstr(&w, "option", at ? at->option : NULL);
	jw_kstr(&w, "value", at ? at->value : NULL);
	jw_obj_end(&w);
	fputc('\n', f);
	(void)fflush(f);
}
