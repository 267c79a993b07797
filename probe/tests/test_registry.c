/* The table of meters: every option table is well formed (choices included), and the
 * image arrays of meters are given back whole pages at a time. */
#include "check.h"
#include "lib/opts.h"
#include "probe.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

static bool has_option(const struct opt_desc *opts, const char *name)
{
	for (const struct opt_desc *o = opts; o->name; o++)
		if (!o->alias_of && !strcmp(o->name, name))
			return true;
	return false;
}

/* A choice: at least two words, none empty or repeated or with a space, a default among them. */
static void check_choice(const char *meter, const struct opt_desc *o)
{
	int n = 0;

	CHECK(o->choices != NULL);
	if (!o->choices)
		return;
	for (; o->choices[n]; n++) {
		CHECK(o->choices[n][0] != '\0');
		CHECK(strpbrk(o->choices[n], " ,;'\"") == NULL);
		for (int k = 0; k < n; k++)
			CHECK(strcmp(o->choices[k], o->choices[n]) != 0);
	}
	if (n < 2 || o->choice_default < 0 || o->choice_default >= n)
		fprintf(stderr, "  %s --%s: %d words, default %d\n", meter, o->name, n,
			o->choice_default);
	CHECK(n >= 2);
	CHECK(o->choice_default >= 0 && o->choice_default < n);
}

static void test_option_tables(void)
{
	int choices = 0;

	for (int i = 0; probe_meters[i]; i++) {
		const struct meter *m = probe_meters[i];

		for (const struct opt_desc *o = m->options; o->name; o++) {
			CHECK(!has_option(o + 1, o->name)); /* each name once */
			if (o->alias_of) {
				CHECK(o->help == NULL);
				CHECK(has_option(m->options, o->alias_of));
				continue;
			}
			CHECK(o->help != NULL);
			CHECK(o->type != OPT_FLAG || o->metavar == NULL);
			if (o->type == OPT_CHOICE) {
				check_choice(m->name, o);
				choices++;
			} else {
				CHECK(o->choices == NULL);
			}
		}
	}
	CHECK(choices >= 7); /* mechanism, transport, region, protect, pattern, tracer x2 */
}

static void test_image_pages(void)
{
	size_t len;

	CHECK(meter_image_pages((char *)4096, 8192, 4096, &len) == (char *)4096);
	CHECK_INT(len, 8192);
	CHECK(meter_image_pages((char *)4097, 8192, 4096, &len) == (char *)8192);
	CHECK_INT(len, 4096); /* the first and last partial pages are not the array's alone */
	(void)meter_image_pages((char *)4097, 4000, 4096, &len);
	CHECK_INT(len, 0);
}

/* After meters_release_image the array's whole pages are no longer mapped (mincore: ENOMEM). */
static void test_release(void)
{
	const struct meter *pf = find_meter("pagefault");
	size_t page = (size_t)sysconf(_SC_PAGESIZE), len;
	unsigned char vec[1];
	char *pages;

	CHECK(pf != NULL && pf->image_array != NULL);
	if (!pf || !pf->image_array)
		return;
	pages = meter_image_pages(pf->image_array, pf->image_array_bytes, page, &len);
	CHECK(len >= (size_t)64 << 20);
	CHECK_INT(mincore(pages, page, vec), 0); /* mapped (.bss) until released */
	meters_release_image();
	errno = 0;
	CHECK_INT(mincore(pages, page, vec), -1);
	CHECK_INT(errno, ENOMEM);
	CHECK_INT(mincore(pages + len - page, page, vec), -1);
	for (int i = 0; probe_meters[i]; i++)
		CHECK(probe_meters[i] == pf || !probe_meters[i]->image_array);
}

int main(void)
{
	test_option_tables();
	test_image_pages();
	test_release();
	return check_report("test_registry");
}
