/* Parameter values (parse.h): one syntax wherever a size, a whole
 * number or a boolean is read, by the filter, the plugins and the
 * appliance.  It is nbdkit's with what our users accepted before on
 * top:
 *
 *   kind      here                                nbdkit 1.32
 *   size      DIGITS, then b, s or k m g t p e    no B or iB after k..e;
 *             (any case), B or iB after k..e      leading blanks, '+' taken
 *   unsigned  DIGITS in decimal, then the         strtoul base 0: "010" is
 *             caller's UNIT if any ("60%")        8, "0x10" 16; blanks, '+'
 *   bool      1 true t yes y on / 0 false f no    the same
 *             n off (the words in any case)
 *
 * So the filter and the plugins parse sizes and numbers here
 * (nbdkit_parse_size refuses 64MiB, nbdkit_parse_unsigned reads 010
 * as 8); the plugins keep nbdkit_parse_bool, which takes the same
 * words.  Nothing here depends on the locale, nbdkit or the core.
 */
#include <config.h>

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "parse.h"

static bool
is_digit (char c)
{
  return c >= '0' && c <= '9';
}

static char
to_lower (char c)
{
  return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
}

/* Decimal digits at *SP, at most MAX, into *OUT; *SP moves past them. */
static const char *
parse_digits (const char **sp, uint64_t max, uint64_t *out)
{
  const char *s = *sp;
  uint64_t v = 0;

  if (*s == '\0')
    return "empty";
  if (*s == '-')
    return "negative";
  if (!is_digit (*s))
    return "not a number";
  for (; is_digit (*s); s++)
    {
      unsigned d = *s - '0';
      if (v > (max - d) / 10)
        return "too large";
      v = v * 10 + d;
    }
  *sp = s;
  *out = v;
  return NULL;
}

/* The multiplier that size suffix S stands for. */
static const char *
size_scale (const char *s, uint64_t *scale)
{
  static const char powers[] = "kmgtpe";
  const char *p;

  *scale = 1;
  if (*s == '\0')
    return NULL;
  if (s[1] == '\0' && (*s == 'b' || *s == 'B'))
    return NULL;
  if (s[1] == '\0' && (*s == 's' || *s == 'S'))
    {
      *scale = 512;
      return NULL;
    }
  p = strchr (powers, to_lower (*s));
  if (p == NULL || (s[1] && strcmp (s + 1, "B") != 0 && strcmp (s + 1, "iB")))
    return "unknown suffix";
  for (const char *q = powers; q <= p; q++)
    *scale *= 1024;
  return NULL;
}

const char *
hhc_parse_size (const char *str, uint64_t *out)
{
  uint64_t v, scale;
  const char *why;

  if ((why = parse_digits (&str, INT64_MAX, &v)) != NULL
      || (why = size_scale (str, &scale)) != NULL)
    return why;
  if (v > INT64_MAX / scale)
    return "too large";
  *out = v * scale;
  return NULL;
}

const char *
hhc_parse_unsigned (const char *str, const char *unit, unsigned *out)
{
  uint64_t v;
  const char *why = parse_digits (&str, UINT_MAX, &v);

  if (why)
    return why;
  if (*str != '\0' && (unit == NULL || strcmp (str, unit) != 0))
    return "not a number";
  *out = v;
  return NULL;
}

/* A and B equal but for the case of ASCII letters. */
static bool
same_word (const char *a, const char *b)
{
  for (; *a && to_lower (*a) == to_lower (*b); a++, b++)
    ;
  return *a == *b;
}

const char *
hhc_parse_bool (const char *str, bool *out)
{
  static const char *const yes[] = { "1", "true", "t", "yes", "y", "on" };
  static const char *const no[] = { "0", "false", "f", "no", "n", "off" };

  for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
    {
      if (same_word (str, yes[i]))
        return *out = true, NULL;
      if (same_word (str, no[i]))
        return *out = false, NULL;
    }
  return "not a boolean (use true or false)";
}
