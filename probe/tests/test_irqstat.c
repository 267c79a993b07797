/* /proc/interrupts as x86, arm64, riscv and powerpc kernels print it (kernel/irq/proc.c
 * show_interrupts and each arch_show_interrupts): header columns that are not CPU
 * numbers (an offline CPU), one-column global rows, IPIn rows, the local timer row of
 * each, counts between two reads (a wrapped 32-bit counter, a row that appears). */
#include "check.h"
#include "lib/irqstat.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* 4 CPUs, CPU1 offline: the columns are CPU0, CPU2, CPU3. */
static const char x86_before[] =
	"           CPU0       CPU2       CPU3       \n"
	"  0:         44          0          0   IO-APIC   2-edge      timer\n"
	"  8:          0          0          1   IO-APIC   8-edge      rtc0\n"
	" 36:          0     120000          7  PCI-MSI 512000-edge      virtio0-input.0\n"
	" 37:         12          0          0  PCI-MSI 512001-edge      virtio0-output.0\n"
	"NMI:          0          0          0   Non-maskable interrupts\n"
	"LOC:    1000000    2000000    3000000   Local timer interrupts\n"
	"SPU:          0          0          0   Spurious interrupts\n"
	"IWI:         10         20         30   IRQ work interrupts\n"
	"RES: 4294967290        100        300   Rescheduling interrupts\n"
	"CAL:       5000       6000       7000   Function call interrupts\n"
	"TLB:        500        600        700   TLB shootdowns\n"
	"ERR:          0\n"
	"MIS:          0\n"
	"PIN:          0          0          0   Posted-interrupt notification event\n";

/* Later: LOC +1000 on CPU2, RES wrapped on CPU0, IRQ 36 +10 on CPU2, IRQ 40 new. */
static const char x86_after[] =
	"           CPU0       CPU2       CPU3       \n"
	"  0:         44          0          0   IO-APIC   2-edge      timer\n"
	"  8:          0          0          1   IO-APIC   8-edge      rtc0\n"
	" 36:          0     120010          7  PCI-MSI 512000-edge      virtio0-input.0\n"
	" 37:         12          0          0  PCI-MSI 512001-edge      virtio0-output.0\n"
	" 40:          0          3          0  PCI-MSI 65536-edge      nvme0q0\n"
	"NMI:          0          0          0   Non-maskable interrupts\n"
	"LOC:    1000100    2001000    3000000   Local timer interrupts\n"
	"SPU:          0          0          0   Spurious interrupts\n"
	"IWI:         10         20         30   IRQ work interrupts\n"
	"RES:         10        105        300   Rescheduling interrupts\n"
	"CAL:       5000       6001       7000   Function call interrupts\n"
	"TLB:        500        600        700   TLB shootdowns\n"
	"ERR:          3\n"
	"MIS:          0\n"
	"PIN:          0          0          0   Posted-interrupt notification event\n";

/* arm64, GICv3, 4 CPUs with CPU2 offline; IPIs as "IPIn:" rows, Err global. */
static const char arm64_before[] =
	"           CPU0       CPU1       CPU3       \n"
	" 11:      59328      48823      50143     GICv3  27 Level     arch_timer\n"
	" 12:          0          0          0     GICv3  23 Level     arm-pmu\n"
	" 14:          5          0          0     GICv3  33 Level     uart-pl011\n"
	" 48:       1032          0          0   ITS-MSI 524288 Edge      virtio0-input.0\n"
	"IPI0:       1543       2215       1617       Rescheduling interrupts\n"
	"IPI1:        455        636        589       Function call interrupts\n"
	"IPI2:          0          0          0       CPU stop interrupts\n"
	"IPI5:          2          1          1       IRQ work interrupts\n"
	"Err:          0\n";

static const char arm64_after[] =
	"           CPU0       CPU1       CPU3       \n"
	" 11:      59328      48823      50393     GICv3  27 Level     arch_timer\n"
	" 12:          0          0          4     GICv3  23 Level     arm-pmu\n"
	" 14:          5          0          0     GICv3  33 Level     uart-pl011\n"
	" 48:       1032          0          9   ITS-MSI 524288 Edge      virtio0-input.0\n"
	"IPI0:       1543       2215       1619       Rescheduling interrupts\n"
	"IPI1:        455        636        589       Function call interrupts\n"
	"IPI2:          0          0          0       CPU stop interrupts\n"
	"IPI5:          2          1          2       IRQ work interrupts\n"
	"Err:          1\n";

static int find_row(const struct irq_table *t, const char *label)
{
	for (int i = 0; i < t->nrows; i++)
		if (!strcmp(t->row[i].label, label))
			return i;
	return -1;
}

static uint64_t count_of(const struct irq_table *t, const char *label, int col)
{
	int i = find_row(t, label);

	return i < 0 ? UINT64_MAX : t->count[(size_t)i * (size_t)t->ncpus + (size_t)col];
}

static int parse(const char *text, const int *cpus, int n, struct irq_table *t)
{
	return irqstat_parse(text, strlen(text), cpus, n, t);
}

/* Both texts parsed for CPU, and the counts of CPU between them into D. */
static void parse_pair(const char *t1, const char *t2, int cpu, struct irq_table *a,
		       struct irq_table *b, struct irq_cpu_delta *d)
{
	CHECK_INT(parse(t1, &cpu, 1, a), 0);
	CHECK_INT(parse(t2, &cpu, 1, b), 0);
	CHECK(irqstat_delta(a, b, 0, d));
}

static void test_x86_parse(void)
{
	int cpus[] = { 2, 1, 0 };
	struct irq_table t;

	CHECK_INT(parse(x86_before, cpus, 3, &t), 0);
	CHECK(t.present[0] && !t.present[1] && t.present[2]); /* CPU1 is offline */
	CHECK_INT(t.nrows, 12);                               /* ERR and MIS are global */
	CHECK_INT(find_row(&t, "ERR"), -1);
	CHECK_INT(find_row(&t, "MIS"), -1);
	CHECK_INT(count_of(&t, "LOC", 0), 2000000); /* CPU2 is the second column */
	CHECK_INT(count_of(&t, "LOC", 2), 1000000);
	CHECK_INT(count_of(&t, "36", 0), 120000);
	CHECK_INT(count_of(&t, "RES", 2), 4294967290u);
	CHECK_STR(t.row[find_row(&t, "36")].name, "PCI-MSI 512000-edge virtio0-input.0");
	CHECK_STR(t.row[find_row(&t, "LOC")].name, "Local timer interrupts");
	CHECK(t.row[find_row(&t, "36")].device);
	CHECK(!t.row[find_row(&t, "LOC")].device);
	CHECK(t.row[find_row(&t, "LOC")].timer);
	irqstat_free(&t);
}

static void test_x86_delta(void)
{
	int cpus[] = { 2, 1, 0 };
	struct irq_table a, b;
	struct irq_cpu_delta d;

	CHECK_INT(parse(x86_before, cpus, 3, &a), 0);
	CHECK_INT(parse(x86_after, cpus, 3, &b), 0);
	CHECK(irqstat_delta(&a, &b, 0, &d));
	CHECK_INT(d.cpu, 2);
	CHECK_STR(d.timer_name, "LOC");
	CHECK_INT(d.timer, 1000);
	CHECK_INT(d.total, 1000 + 10 + 3 + 5 + 1);
	CHECK_INT(d.ntop, 5);
	CHECK_STR(b.row[d.top[0].row].label, "LOC");
	CHECK_STR(b.row[d.top[1].row].label, "36");
	CHECK_INT(d.top[1].count, 10);
	CHECK_STR(b.row[d.top[2].row].label, "RES");
	CHECK_STR(b.row[d.top[3].row].label, "40"); /* absent before: counted from 0 */
	CHECK_STR(b.row[d.top[4].row].label, "CAL");
	CHECK(!irqstat_device(&b, d.top[0].row, &d));
	CHECK(irqstat_device(&b, d.top[1].row, &d));
	CHECK(!irqstat_device(&b, d.top[2].row, &d));
	/* IRQ 0 "timer" is the global PIT/HPET, a device: LOC is the local timer */
	CHECK(irqstat_device(&b, find_row(&b, "0"), &d));
	CHECK(!irqstat_delta(&a, &b, 1, &d)); /* offline CPU: no column */
	CHECK(irqstat_delta(&a, &b, 2, &d));
	CHECK_INT(d.timer, 100);
	CHECK_INT(d.total, 100 + 16); /* RES wrapped at 2^32: 4294967290 -> 10 */
	irqstat_free(&a);
	irqstat_free(&b);
}

static void test_arm64(void)
{
	int cpus[] = { 3, 2 };
	struct irq_table a, b;
	struct irq_cpu_delta d;

	CHECK_INT(parse(arm64_before, cpus, 2, &a), 0);
	CHECK_INT(parse(arm64_after, cpus, 2, &b), 0);
	CHECK(a.present[0] && !a.present[1]);
	CHECK_INT(find_row(&a, "Err"), -1);
	CHECK_INT(count_of(&a, "IPI0", 0), 1617);
	CHECK_STR(a.row[find_row(&a, "IPI1")].name, "Function call interrupts");
	CHECK(irqstat_delta(&a, &b, 0, &d));
	CHECK_STR(d.timer_name, "arch_timer");
	CHECK_INT(d.timer, 250);
	CHECK_INT(d.total, 250 + 4 + 9 + 2 + 1);
	CHECK_INT(d.ntop, 5);
	CHECK_STR(b.row[d.top[0].row].label, "11");
	CHECK(!irqstat_device(&b, d.top[0].row, &d)); /* the timer */
	CHECK_STR(b.row[d.top[1].row].label, "48");
	CHECK(irqstat_device(&b, d.top[1].row, &d));
	CHECK_STR(b.row[d.top[2].row].label, "12");
	CHECK(!irqstat_device(&b, d.top[2].row, &d));      /* arm-pmu: PPI 23, per CPU */
	CHECK(irqstat_device(&b, find_row(&b, "14"), &d)); /* SPI 33: a device */
	CHECK(!irqstat_device(&b, find_row(&b, "IPI0"), &d));
	CHECK(!irqstat_delta(&a, &b, 1, &d));
	irqstat_free(&a);
	irqstat_free(&b);
}

/* riscv: IPIs with one space before the name, the timer is "riscv-timer"; a label of
 * width 4 (nr_irqs >= 1000) puts a space after "IPI0:". */
static void test_riscv_and_wide_labels(void)
{
	static const char t1[] =
		"            CPU0       CPU1       \n"
		"    5:        900        800  RISC-V INTC   5 Edge      riscv-timer\n"
		"IPI0:          3          4 Rescheduling interrupts\n";
	static const char t2[] =
		"            CPU0       CPU1       \n"
		"    5:        950        820  RISC-V INTC   5 Edge      riscv-timer\n"
		"IPI0:          3          5 Rescheduling interrupts\n";
	struct irq_table a, b;
	struct irq_cpu_delta d;

	parse_pair(t1, t2, 1, &a, &b, &d);
	CHECK_STR(d.timer_name, "riscv-timer");
	CHECK_INT(d.timer, 20);
	CHECK_INT(d.total, 21);
	irqstat_free(&a);
	irqstat_free(&b);
}

/* powerpc prints two LOC rows: matched by their order, both counted as the timer. */
static void test_powerpc_two_loc(void)
{
	static const char t1[] =
		"           CPU0       CPU1       \n"
		"LOC:        100        200   Local timer interrupts for timer event "
		"device\n"
		"LOC:         10         20   Local timer interrupts for others\n";
	static const char t2[] =
		"           CPU0       CPU1       \n"
		"LOC:        100        260   Local timer interrupts for timer event "
		"device\n"
		"LOC:         10         21   Local timer interrupts for others\n";
	struct irq_table a, b;
	struct irq_cpu_delta d;

	parse_pair(t1, t2, 1, &a, &b, &d);
	CHECK_INT(a.row[1].occurrence, 1);
	CHECK_INT(d.timer, 61);
	CHECK_INT(d.ntop, 2);
	CHECK_INT(d.top[0].count, 60);
	irqstat_free(&a);
	irqstat_free(&b);
}

/* More rows than kept: the first IRQSTAT_ROWS_MAX, and the table says it is cut. */
static void test_too_many_rows(void)
{
	size_t cap = (IRQSTAT_ROWS_MAX + 2) * 40, off;
	char *text = malloc(cap);
	int cpus[] = { 0 };
	struct irq_table t;

	off = (size_t)snprintf(text, cap, "           CPU0       \n");
	for (int i = 0; i <= IRQSTAT_ROWS_MAX; i++)
		off += (size_t)snprintf(text + off, cap - off, "%5d: %10d   chip edge d\n", i, 1);
	CHECK_INT(irqstat_parse(text, off, cpus, 1, &t), 0);
	CHECK_INT(t.nrows, IRQSTAT_ROWS_MAX);
	CHECK(t.truncated);
	irqstat_free(&t);
	free(text);
}

/* No local timer row: timer_name NULL. More rows than listed: the largest kept, all in
 * the total. A cut last line and a header-less text. */
static void test_limits(void)
{
	size_t cap = 64 * 1024, off;
	char *t1 = malloc(cap), *t2 = malloc(cap);
	int cpus[] = { 0 };
	struct irq_table a, b;
	struct irq_cpu_delta d;
	uint64_t total = 0;

	off = (size_t)snprintf(t1, cap, "           CPU0       \n");
	(void)snprintf(t2, cap, "%s", t1);
	for (int i = 0; i < 40; i++) {
		off += (size_t)snprintf(t1 + off, cap - off, "%3d: %10d   chip %d-edge dev%d\n", i,
					0, i, i);
		(void)snprintf(t2 + strlen(t2), cap - strlen(t2),
			       "%3d: %10d   chip %d-edge dev%d\n", i, i + 1, i, i);
		total += (uint64_t)i + 1;
	}
	parse_pair(t1, t2, 0, &a, &b, &d);
	CHECK(d.timer_name == NULL);
	CHECK_INT(d.total, total);
	CHECK_INT(d.ntop, IRQSTAT_TOP);
	CHECK_INT(d.top[0].count, 40);
	CHECK_INT(d.top[IRQSTAT_TOP - 1].count, 40 - IRQSTAT_TOP + 1);
	irqstat_free(&a);
	irqstat_free(&b);

	CHECK_INT(irqstat_parse(t1, strlen(t1) - 3, cpus, 1, &a), 0); /* last line cut */
	CHECK_INT(a.nrows, 39);
	CHECK(!a.truncated);
	irqstat_free(&a);
	CHECK_INT(parse("", cpus, 1, &a), -EINVAL);
	CHECK_INT(parse("no header here\n 0: 1 2\n", cpus, 1, &a), -EINVAL);
	free(t1);
	free(t2);
}

/* irqstat_read: a file, a missing one, one beyond the read limit (truncated). */
static void test_read(void)
{
	char path[] = "/tmp/rtlab-irqstat-XXXXXX";
	int fd = mkstemp(path), cpus[] = { 2 };
	struct irq_table t;
	FILE *f;

	CHECK(fd >= 0);
	f = fdopen(fd, "w");
	fputs(x86_before, f);
	fflush(f);
	CHECK_INT(irqstat_read(path, cpus, 1, &t), 0);
	CHECK(!t.truncated && t.t_ns > 0);
	CHECK_INT(count_of(&t, "LOC", 0), 2000000);
	irqstat_free(&t);
	for (size_t n = strlen(x86_before); n <= IRQSTAT_READ_MAX;)
		n += (size_t)fprintf(f, "%*s\n", 200, "x:");
	fclose(f);
	CHECK_INT(irqstat_read(path, cpus, 1, &t), 0);
	CHECK(t.truncated);
	CHECK_INT(count_of(&t, "LOC", 0), 2000000);
	irqstat_free(&t);
	(void)unlink(path);
	CHECK_INT(irqstat_read(path, cpus, 1, &t), -ENOENT);
}

int main(void)
{
	test_x86_parse();
	test_x86_delta();
	test_arm64();
	test_riscv_and_wide_labels();
	test_powerpc_two_loc();
	test_limits();
	test_too_many_rows();
	test_read();
	return check_report("test_irqstat");
}
