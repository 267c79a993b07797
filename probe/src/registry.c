/* The one table of meters and loads. Adding one: its own file, a line here. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "probe.h"

extern const struct meter meter_wakeup;
extern const struct meter meter_periodic;
extern const struct meter meter_response;
extern const struct meter meter_noise;
extern const struct meter meter_pagefault;
extern const struct meter meter_alloc;
extern const struct meter meter_preempt;
extern const struct meter meter_worker;
extern const struct meter meter_pipeline;
extern const struct meter meter_sched;
extern const struct load_kind load_forkcopy;
extern const struct load_kind load_spin;
extern const struct load_kind load_stride;
extern const struct load_kind load_ipc;
extern const struct load_kind load_io;
extern const struct load_kind load_net;
extern const struct load_kind load_timer;
extern const struct load_kind load_stressng;
extern const struct load_kind load_hackbench;
extern const struct load_kind load_iperf3;

const struct meter *const probe_meters[] = {
	&meter_wakeup, &meter_periodic, &meter_response, &meter_noise,    &meter_pagefault,
	&meter_alloc,  &meter_preempt,  &meter_worker,   &meter_pipeline, &meter_sched,
	NULL,
};

const struct load_kind *const probe_load_kinds[] = {
	&load_forkcopy, &load_spin,     &load_stride,    &load_ipc,    &load_io, &load_net,
	&load_timer,    &load_stressng, &load_hackbench, &load_iperf3, NULL,
};

const struct meter *find_meter(const char *name)
{
	for (int i = 0; probe_meters[i]; i++)
		if (!strcmp(probe_meters[i]->name, name))
			return probe_meters[i];
	return NULL;
}

const struct load_kind *find_load_kind(const char *name)
{
	for (int i = 0; probe_load_kinds[i]; i++)
		if (!strcmp(probe_load_kinds[i]->name, name))
			return probe_load_kinds[i];
	return NULL;
}

char *meter_image_pages(char *a, size_t bytes, size_t page, size_t *len)
{
	uintptr_t lo = ((uintptr_t)a + page - 1) & ~(uintptr_t)(page - 1);
	uintptr_t hi = ((uintptr_t)a + bytes) & ~(uintptr_t)(page - 1);

	*len = hi > lo ? hi - lo : 0;
	return (char *)lo;
}

/* Calls FN with the whole pages of every meter's image_array. */
static void each_image(void (*fn)(char *pages, size_t len))
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), len;

	for (int i = 0; probe_meters[i]; i++) {
		const struct meter *m = probe_meters[i];
		char *pages = m->image_array ? meter_image_pages(m->image_array,
								 m->image_array_bytes, page, &len)
					     : NULL;

		if (pages && len)
			fn(pages, len);
	}
}

static void image_unmap(char *pages, size_t len)
{
	(void)munmap(pages, len); /* should it stay, a static slice's MAP_FIXED_NOREPLACE says so */
}

#ifdef __SANITIZE_ADDRESS__
static void image_map_back(char *pages, size_t len)
{
	(void)mmap(pages, len, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
}

/* LeakSanitizer reads all of .bss at exit, after the atexit handlers: map it back. */
static void images_map_back(void)
{
	each_image(image_map_back);
}
#endif

void meters_release_image(void)
{
	static bool released;

	if (released)
		return;
	released = true;
	each_image(image_unmap);
#ifdef __SANITIZE_ADDRESS__
	(void)atexit(images_map_back);
#endif
}
