/*
 * Evidence of the conditions a run really measured in (the result document's
 * "conditions", docs/result-format.md): interrupts on the measured CPUs and kernel log
 * records between the start and the end of measuring, and the settings read back from the
 * kernel at its end (each thread's policy and affinity, locked memory, the held
 * /dev/cpu_dma_latency value). Every read happens outside the measuring window: before
 * the threads are released, after each thread's loop, after they have all ended. A read
 * that fails is recorded as an error in its part; it never fails the run.
 */
#ifndef RTLAB_CONDITIONS_H
#define RTLAB_CONDITIONS_H

struct run;
struct mthread;
struct jw;

/* Before the threads are released (they wait at the start barrier): the CPUs to follow,
 * the first /proc/interrupts read, /dev/kmsg opened at its end. */
void conditions_start(struct run *r);

/* In measuring thread T after its loop, before its teardown: its policy and affinity. */
void conditions_thread_end(struct run *r, struct mthread *t);

/* After every thread has ended, before memory is unlocked and the dma fd closed. */
void conditions_end(struct run *r);

/* The "conditions" object, or null when it was never started. */
void conditions_json(struct jw *w, const struct run *r);

void conditions_free(struct run *r);

#endif
