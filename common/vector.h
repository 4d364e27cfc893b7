/* A type-safe growable array, for the core, the plugins and the
 * appliance.
 */
#ifndef HHC_COMMON_VECTOR_H
#define HHC_COMMON_VECTOR_H

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

/* Type-safe growable array: HHC_VECTOR (name, type) defines
 * struct name { type *ptr; size_t len, cap; } and name_append,
 * name_reset.
 */
#define HHC_VECTOR(name, type)                                                 \
  struct name {                                                                \
    type *ptr;                                                                 \
    size_t len, cap;                                                           \
  };                                                                           \
  static inline int name##_append (struct name *v, type elem)                  \
  {                                                                            \
    if (v->len == v->cap)                                                      \
      {                                                                        \
        size_t ncap = v->cap ? v->cap * 2 : 16;                                \
        type *n = realloc (v->ptr, ncap * sizeof (type));                      \
        if (n == NULL)                                                         \
          return ENOMEM;                                                       \
        v->ptr = n;                                                            \
        v->cap = ncap;                                                         \
      }                                                                        \
    v->ptr[v->len++] = elem;                                                   \
    return 0;                                                                  \
  }                                                                            \
  static inline void name##_reset (struct name *v)                             \
  {                                                                            \
    free (v->ptr);                                                             \
    v->ptr = NULL;                                                             \
    v->len = v->cap = 0;                                                       \
  }

#endif /* HHC_COMMON_VECTOR_H */
