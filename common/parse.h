/* Parameter values: sizes, whole numbers and booleans, with one
 * syntax for the filter, the plugins and the appliance (see parse.c).
 *
 * Each function returns NULL and sets *OUT, or leaves *OUT alone and
 * returns why STR was refused: a static string for the caller's
 * message ("cos: size=1Q: unknown suffix").
 */
#ifndef HHC_COMMON_PARSE_H
#define HHC_COMMON_PARSE_H

#include <stdbool.h>
#include <stdint.h>

/* A size: decimal digits, then optionally b or B (bytes), s or S
 * (512-byte sectors), or k, m, g, t, p or e in either case (powers of
 * 1024), which may be followed by B or iB: 64M, 64m, 64MB and 64MiB
 * are all 64 * 1024 * 1024.  At most INT64_MAX.
 */
extern const char *hhc_parse_size (const char *str, uint64_t *out);

/* A whole number: decimal digits ("010" is ten), at most UINT_MAX,
 * then UNIT if it is not NULL and the caller allows one ("60%" with
 * UNIT "%"; "60" is accepted as well).
 */
extern const char *hhc_parse_unsigned (const char *str, const char *unit,
                                       unsigned *out);

/* A boolean: 1, true, t, yes, y, on or 0, false, f, no, n, off; the
 * words in either case.
 */
extern const char *hhc_parse_bool (const char *str, bool *out);

#endif /* HHC_COMMON_PARSE_H */
