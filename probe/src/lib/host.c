#include <stdio.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "host.h"
#include "jsonw.h"

/* 1 when /sys/kernel/realtime says so (PREEMPT_RT kernels), else 0. */
static int host_realtime(void)
{
	FILE *f = fopen("/sys/kernel/realtime", "r");
	int v = 0;

	if (!f)
		return 0;
	if (fscanf(f, "%d", &v) != 1)
		v = 0;
	(void)fclose(f);
	return v == 1;
}

void host_json(struct jw *w)
{
	struct utsname u;

	jw_obj_begin(w);
	jw_key(w, "uname");
	jw_obj_begin(w);
	if (uname(&u) == 0) {
		jw_kstr(w, "sysname", u.sysname);
		jw_kstr(w, "nodename", u.nodename);
		jw_kstr(w, "release", u.release);
		jw_kstr(w, "version", u.version);
		jw_kstr(w, "machine", u.machine);
	}
	jw_obj_end(w);
	jw_kint(w, "realtime", host_realtime());
	jw_kint(w, "cpus_online", sysconf(_SC_NPROCESSORS_ONLN));
	jw_kint(w, "cpus_configured", sysconf(_SC_NPROCESSORS_CONF));
	jw_obj_end(w);
}
