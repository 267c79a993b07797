/* rtlab-probe sysinfo: the system files the readiness audit reads, as one document. */
#ifndef RTLAB_SYSINFO_H
#define RTLAB_SYSINFO_H

/* ARGV after "sysinfo"; returns a probe exit code. */
int sysinfo_main(int argc, char **argv);

#endif
