/* The filter's control socket (control=PATH), see control.c. */
#ifndef HHC_FILTER_CONTROL_H
#define HHC_FILTER_CONTROL_H

#include "hhccore.h"

/* Remember the socket's path (.config); -1 after nbdkit_error. */
int control_set_path (const char *path);

/* Listen, if a path was set, serving vol through bctx (.after_fork,
 * once the volume is started); -1 after nbdkit_error.
 */
int control_start (struct hhc_volume *vol, void *bctx);

/* Stop listening and wait for the requests in progress (.cleanup,
 * before the volume is closed).
 */
void control_stop (void);

/* Forget the path (.unload). */
void control_free (void);

#endif /* HHC_FILTER_CONTROL_H */
