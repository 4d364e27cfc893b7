/* A heap pointer freed at the end of the enclosing scope. */
#ifndef HHC_COMMON_CLEANUP_H
#define HHC_COMMON_CLEANUP_H

#include <stdlib.h>

/* The cleanup of HHC_CLEANUP_FREE: free *P (a pointer to a pointer). */
static inline void
hhc_freep (void *p)
{
  free (*(void **)p);
}

/* A pointer freed at the end of scope:
 * HHC_CLEANUP_FREE char *buf = malloc (n);
 */
#define HHC_CLEANUP_FREE __attribute__ ((cleanup (hhc_freep)))

#endif /* HHC_COMMON_CLEANUP_H */
