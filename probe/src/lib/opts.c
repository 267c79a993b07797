#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "jsonw.h"
#include "loadrun.h"
#include "opts.h"
#include "policy.h"
#include "timeutil.h"

static const char *const type_names[] = {
	[OPT_FLAG] = "flag",	   [OPT_INT] = "int",	    [OPT_DURATION] = "duration",
	[OPT_CPULIST] = "cpulist", [OPT_POLICY] = "policy", [OPT_STRING] = "string",
	[OPT_LOAD] = "load",
};

static const struct opt_desc *find_opt(const struct opt_table *tables, int ntables,
				       const char *name, size_t len, void **base)
{
	for (int t = 0; t < ntables; t++) {
		for (const struct opt_desc *o = tables[t].opts; o->name; o++) {
			if (strlen(o->name) == len && !strncmp(o->name, name, len)) {
				*base = tables[t].base;
				return o;
			}
		}
	}
	return NULL;
}

static void range_error(const struct opt_desc *o, const char *val, char *err, size_t errlen)
{
	char lo[32], hi[32];

	if (o->type == OPT_DURATION) {
		format_duration(o->min, lo, sizeof(lo));
		format_duration(o->max, hi, sizeof(hi));
	} else {
		snprintf(lo, sizeof(lo), "%lld", (long long)o->min);
		snprintf(hi, sizeof(hi), "%lld", (long long)o->max);
	}
	snprintf(err, errlen, "--%s: \"%s\" is out of range (%s..%s%s%s)", o->name, val, lo, hi,
		 o->type == OPT_INT && o->metavar ? " " : "",
		 o->type == OPT_INT && o->metavar ? o->metavar : "");
}

static int set_value(const struct opt_desc *o, void *base, const char *val,
		     const struct cpulist *online, char *err, size_t errlen)
{
	char *field = (char *)base + o->offset;
	char why[256];
	int64_t v;

	switch (o->type) {
	case OPT_FLAG:
		*(bool *)field = true;
		return 0;
	case OPT_INT:
		if (parse_int64(val, &v)) {
			snprintf(err, errlen, "--%s: \"%s\" is not a whole number", o->name, val);
			return -EINVAL;
		}
		if (v < o->min || v > o->max)
			goto out_range;
		*(int64_t *)field = v;
		return 0;
	case OPT_DURATION:
		if (parse_duration_ns(val, &v, why, sizeof(why)))
			goto out_why;
		if (v < o->min || v > o->max)
			goto out_range;
		*(int64_t *)field = v;
		return 0;
	case OPT_CPULIST:
		if (cpulist_parse(val, (struct cpulist *)field, why, sizeof(why)) ||
		    cpulist_check_subset((struct cpulist *)field, online, why, sizeof(why)))
			goto out_why;
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
	}
	return -EINVAL;
out_why:
	snprintf(err, errlen, "--%s: %s", o->name, why);
	return -EINVAL;
out_range:
	range_error(o, val, err, errlen);
	return -EINVAL;
}

int opts_parse(int argc, char **argv, const struct opt_table *tables, int ntables,
	       const struct cpulist *online, const char **pos, int *npos, char *err, size_t errlen)
{
	int maxpos = *npos;

	*npos = 0;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];

		if (!strcmp(a, "-h") || !strcmp(a, "--help"))
			return 1;
		if (strncmp(a, "--", 2) || !a[2]) {
			if (*npos >= maxpos) {
				snprintf(err, errlen, "unexpected argument \"%s\"", a);
				return -EINVAL;
			}
			pos[(*npos)++] = a;
			continue;
		}
		const char *name = a + 2, *eq = strchr(name, '=');
		size_t len = eq ? (size_t)(eq - name) : strlen(name);
		void *base;
		const struct opt_desc *o = find_opt(tables, ntables, name, len, &base);

		if (!o) {
			snprintf(err, errlen, "unknown option \"--%.*s\" (see --help)", (int)len, name);
			return -EINVAL;
		}
		const char *val = NULL;

		if (o->type == OPT_FLAG) {
			if (eq) {
				snprintf(err, errlen, "--%s takes no value", o->name);
				return -EINVAL;
			}
		} else if (eq) {
			val = eq + 1;
		} else if (i + 1 < argc) {
			val = argv[++i];
		} else {
			snprintf(err, errlen, "--%s needs a value (%s)", o->name, o->metavar);
			return -EINVAL;
		}
		if (set_value(o, base, val, online, err, errlen))
			return -EINVAL;
		if (o->set_offset != OPT_NO_SET)
			*(bool *)((char *)base + o->set_offset) = true;
	}
	return 0;
}

void opts_help(FILE *f, const struct opt_table *tables, int ntables)
{
	for (int t = 0; t < ntables; t++) {
		for (const struct opt_desc *o = tables[t].opts; o->name; o++) {
			char head[64];

			snprintf(head, sizeof(head), "--%s%s%s", o->name, o->metavar ? " " : "",
				 o->metavar ? o->metavar : "");
			fprintf(f, "  %-24s %s\n", head, o->help);
		}
	}
}

void opts_json(struct jw *w, const struct opt_desc *opts)
{
	jw_arr_begin(w);
	for (const struct opt_desc *o = opts; o->name; o++) {
		jw_obj_begin(w);
		jw_kstr(w, "name", o->name);
		jw_kstr(w, "type", type_names[o->type]);
		if (o->type == OPT_INT || o->type == OPT_DURATION) {
			jw_kint(w, o->type == OPT_DURATION ? "min_ns" : "min", o->min);
			jw_kint(w, o->type == OPT_DURATION ? "max_ns" : "max", o->max);
		}
		jw_kstr(w, "help", o->help);
		jw_obj_end(w);
	}
	jw_arr_end(w);
}
