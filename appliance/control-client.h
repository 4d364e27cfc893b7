/* The client side of the hhc filter's control socket (control=PATH,
 * nbdkit-hhc-filter/control.c): used by hhc-gateway and hhcctl.
 */
#ifndef HHC_APPLIANCE_CONTROL_CLIENT_H
#define HHC_APPLIANCE_CONTROL_CLIENT_H

#include <stddef.h>
#include <stdint.h>

/* The volume's statistics JSON (malloc'd), or NULL with a message in
 * err (when err is not NULL).  Waits at most 5 s.
 */
char *control_stats (const char *sock, char *err, size_t errlen);

/* Write back every dirty block and flush the backend; progress (may be
 * NULL) is called with the dirty count as it falls.  0 when done, -1
 * with a message in err.
 */
int control_drain (const char *sock, void (*progress) (void *, uint64_t),
                   void *opaque, char *err, size_t errlen);

#endif /* HHC_APPLIANCE_CONTROL_CLIENT_H */
