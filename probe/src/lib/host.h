/* What the document says about the machine it ran on. */
#ifndef RTLAB_HOST_H
#define RTLAB_HOST_H

struct jw;

/* Writes the "host" object: uname, realtime flag, CPU counts. */
void host_json(struct jw *w);

#endif
