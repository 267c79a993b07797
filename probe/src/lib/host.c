#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

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

/*
 * The hypervisor this probe runs under, as the CPU or the firmware says. x86: the
 * "hypervisor present" bit (CPUID.1:ECX[31]) and the vendor signature of leaf
 * 0x40000000 ("KVMKVMKVM", QEMU's "TCGTCGTCGTCG" under emulation, "VMwareVMware",
 * "Microsoft Hv", "XenVMMXenVMM", ...). Elsewhere: /sys/hypervisor/type (Xen), the DMI
 * system vendor, QEMU's "virt" machine in the device tree.
 */
struct virt {
	const char *kind;       /* "none", "vm" or "unknown" */
	const char *hypervisor; /* kvm, tcg, vmware, hyperv, xen, qemu, other; "" if none */
	const char *source;     /* cpuid, sysfs, dmi, device-tree, none */
	char signature[16];
};

#if defined(__x86_64__) || defined(__i386__)
static const struct {
	const char *signature;
	const char *name;
} virt_signatures[] = {
	{ "KVMKVMKVM", "kvm" },          { "TCGTCGTCGTCG", "tcg" },   { "VMwareVMware", "vmware" },
	{ "Microsoft Hv", "hyperv" },    { "XenVMMXenVMM", "xen" },   { "ACRNACRNACRN", "acrn" },
	{ " lrpepyh  vr", "parallels" }, { "bhyve bhyve ", "bhyve" }, { "QNXQVMBSQG", "qnx" },
};

static const char *virt_by_signature(const char *sig)
{
	size_t i;

	for (i = 0; i < sizeof(virt_signatures) / sizeof(virt_signatures[0]); i++)
		if (strcmp(sig, virt_signatures[i].signature) == 0)
			return virt_signatures[i].name;
	return "other";
}
#endif

/* The first line of PATH (at most LEN - 1 bytes) into BUF; 0 or -1. */
static int read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f)
		return -1;
	n = fread(buf, 1, len - 1, f);
	(void)fclose(f);
	buf[n] = '\0';
	buf[strcspn(buf, "\n")] = '\0';
	return n ? 0 : -1;
}

static void virt_detect(struct virt *v)
{
	static const struct {
		const char *vendor;
		const char *name;
	} dmi[] = {
		{ "QEMU", "qemu" },          { "KVM", "kvm" },
		{ "VMware", "vmware" },      { "Xen", "xen" },
		{ "innotek", "virtualbox" }, { "Amazon EC2", "kvm" },
	};
	char buf[256];
	size_t i;

	memset(v, 0, sizeof(*v));
	v->kind = "none";
	v->hypervisor = "";
	v->source = "none";
#if defined(__x86_64__) || defined(__i386__)
	{
		unsigned int a, b, c, d;

		if (__get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 31))) {
			__cpuid(0x40000000, a, b, c, d);
			memcpy(v->signature, &b, 4);
			memcpy(v->signature + 4, &c, 4);
			memcpy(v->signature + 8, &d, 4);
			v->signature[12] = '\0';
			v->kind = "vm";
			v->hypervisor = virt_by_signature(v->signature);
			v->source = "cpuid";
		}
		return; /* the CPU says it: no hypervisor bit, no hypervisor */
	}
#endif
	if (read_line("/sys/hypervisor/type", buf, sizeof(buf)) == 0) {
		v->kind = "vm";
		v->hypervisor = strcmp(buf, "xen") == 0 ? "xen" : "other";
		v->source = "sysfs";
		return;
	}
	if (read_line("/sys/class/dmi/id/sys_vendor", buf, sizeof(buf)) == 0) {
		for (i = 0; i < sizeof(dmi) / sizeof(dmi[0]); i++) {
			if (strncmp(buf, dmi[i].vendor, strlen(dmi[i].vendor)) == 0) {
				v->kind = "vm";
				v->hypervisor = dmi[i].name;
				v->source = "dmi";
				return;
			}
		}
	}
	{
		FILE *f = fopen("/proc/device-tree/compatible", "r");
		size_t n = 0;

		if (f) {
			n = fread(buf, 1, sizeof(buf) - 1, f);
			(void)fclose(f);
		}
		buf[n] = '\0';
		/* NUL-separated strings: QEMU's arm "virt" machine says linux,dummy-virt */
		for (i = 0; i < n; i += strlen(buf + i) + 1) {
			if (strcmp(buf + i, "linux,dummy-virt") == 0) {
				v->kind = "vm";
				v->hypervisor = "qemu";
				v->source = "device-tree";
				return;
			}
		}
	}
}

void host_json(struct jw *w)
{
	struct utsname u;
	struct virt virt;

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
	virt_detect(&virt);
	jw_key(w, "virtualization");
	jw_obj_begin(w);
	jw_kstr(w, "kind", virt.kind);
	jw_kstr(w, "hypervisor", virt.hypervisor);
	jw_kstr(w, "signature", virt.signature);
	jw_kstr(w, "source", virt.source);
	jw_obj_end(w);
	jw_obj_end(w);
}
